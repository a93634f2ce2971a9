"""The port model: the tc tree of every port (tc.py), the eBPF port program that runs on it
(bpf/, deployed by program.py), what configures one port (interface.py), struct port_config's
one description (fields.py), the other structs of its maps described once (structs.py: edit there,
then `python -m ccemu.ports.structs > ccemu/ports/bpf/port_structs.h`), their Python layouts
(layouts.py) and its maps' reader (maps.py).

Adding a port profile: CONTRIBUTING.md's checklist ("A port discipline"). Nothing else lists
profiles or markers: tc.py, the loader's config lines, maps.py's layout and fabric/ follow the
profile's class (model/config/ports.py) and the marker's fields (fields.py).
"""
