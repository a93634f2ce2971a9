"""What each `ccemu` command does with its parsed arguments (cli.py parses and dispatches): one
module per group of commands, each turning arguments into calls of the package that does the work,
imported where the command runs, so that `ccemu report` or `ccemu validate` loads no Mininet.
Imports nothing at load."""
