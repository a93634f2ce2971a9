"""An inventory is judged before a sweep is planned across it (sweeps/machines.py): readable,
machines named by the name rule, each machine listed once. Runs the venv's ansible-inventory."""

import pytest

from ccemu.model.config import ConfigError
from ccemu.sweeps.machines import ANSIBLE_INVENTORY, Machine, machines_of

pytestmark = pytest.mark.skipif(not ANSIBLE_INVENTORY.exists(),
                                reason=f"no {ANSIBLE_INVENTORY} (make test installs it)")


def inventory(tmp_path, text: str):
    path = tmp_path / "inventory.yml"
    path.write_text(text)
    return path


def test_the_machines_of_an_inventory_are_read_with_where_ansible_reaches_them(tmp_path):
    path = inventory(tmp_path, "ccemu:\n  hosts:\n    w1: {ansible_host: 127.0.0.1, ansible_port: 2201}\n"
                               "    w2: {ansible_host: 127.0.0.1, ansible_port: 2202}\n"
                               "    here: {ansible_connection: local}\n    lab-3.example: {}\n")
    assert machines_of(path) == [Machine("w1", "127.0.0.1:2201"), Machine("w2", "127.0.0.1:2202"),
                                 Machine("here", "local"), Machine("lab-3.example", "lab-3.example:22")]


@pytest.mark.parametrize("text, message", [
    ("ccemu: [this is not, an inventory\n", "lists no machine (Unable to parse"),
    ("", "lists no machine"),
    ("ccemu:\n  hosts: {}\n", "lists no machine"),
    ("ccemu:\n  hosts:\n    'x/../../../../etc': {}\n", "machine 'x/../../../../etc': must be a name"),
    ("ccemu:\n  hosts:\n    '..': {}\n", "machine '..': must be a name"),
    ("ccemu:\n  hosts:\n    a: {ansible_host: 10.0.0.5}\n    b: {ansible_host: 10.0.0.5, ansible_port: 22}\n",
     "a and b are one machine (10.0.0.5:22)"),
])
def test_a_bad_inventory_is_one_line_naming_what_is_wrong(tmp_path, text, message):
    path = inventory(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        machines_of(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)
