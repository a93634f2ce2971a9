"""One fabric across several machines: the controller's side (fabric.py: plan, sessions, the
whole fabric's checks) and each machine's (part.py: builds and serves its part), talking over
session.py's channel (ssh, as Ansible reaches the machines)."""
