"""Docker hosts: Docker's engine (engine.py), the host image (image.py), the fabric's host node in a
container (host.py) and what its cgroups count (cgroups.py)."""

# In a run's state directory: each Docker host's container (host.Container.as_json()), for the
# collector and `ccemu exec --in-container`.
CONTAINERS_FILE = "containers.json"
