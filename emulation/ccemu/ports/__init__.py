"""The port model: the tc tree of every port (tc.py), the eBPF port program that runs on it
(bpf/, deployed by program.py), what configures one port (interface.py), struct port_config's
one description (fields.py) and its maps' reader (maps.py).

Adding a port profile: one class in model/config/ports.py (in PORT_PROFILE_CLASSES) whose
`marker()` names an existing marker of fields.MARKERS and its parameters. If it marks in a way
no marker does: also its name in fields.MARKERS, its parameters in fields.PORT_CONFIG_FIELDS
(then `python -m ccemu.ports.fields > ccemu/ports/bpf/port_config.h`) and one `case` in
bpf/port.bpf.c's marker switch. Nothing else lists profiles or markers: tc.py, the loader's
config lines, maps.py's layout and fabric/ follow.
"""
