"""The exit statuses of `ccemu` (cli.py's docstring lists them) and the one line a failure prints."""

from __future__ import annotations

import errno
import sys

from ..model.config import ConfigError

# The statuses of the module docstring, which `ccemu --help` shows.
EXIT_FAILED, EXIT_BAD_CONFIG, EXIT_UNFINISHED = 1, 2, 4
EXIT_NOT_BUILT, EXIT_FABRIC, EXIT_MONITORING, EXIT_DOES_NOT_FIT, EXIT_DISK_FULL = 5, 6, 7, 8, 9


def failures() -> list[tuple[type | tuple[type, ...], int, str]]:
    """(exception class, exit status, what to do) for the failures ccemu knows, most specific
    first. Imported here: the modules behind them pull in Mininet, pyroute2 and friends."""
    from ..containers.engine import EngineError
    from ..containers.image import ImageError
    from ..programs.cchost import CchostMissing
    from ..model.config import DoesNotFit
    from ..fabric.allocators import AllocatorMissing
    from ..fabric.lifecycle import FabricError, LeftoversError
    from ..fabric.inventory import InventoryError
    from ..fabric.namespaces import NamespaceError
    from ..metrics.monitoring import MonitoringError
    from ..fabric.ovs import OvsError, OvsMissing
    from ..ports.program import PortProgramMissing
    from ..results.space import ResultsDiskFull
    from ..sweeps.fanout import FanoutError
    from ..fabric.tunnels import AcrossMachinesError
    from ..machines.session import MachineLost

    nothing_left = "nothing of the run is left"
    return [
        (DoesNotFit, EXIT_DOES_NOT_FIT, ""),
        (ConfigError, EXIT_BAD_CONFIG, ""),
        (PortProgramMissing, EXIT_NOT_BUILT, ""),
        (CchostMissing, EXIT_NOT_BUILT, ""),
        (OvsMissing, EXIT_NOT_BUILT, ""),
        (AllocatorMissing, EXIT_NOT_BUILT, nothing_left),
        (ImageError, EXIT_NOT_BUILT, nothing_left),
        (EngineError, EXIT_FABRIC, nothing_left),
        (MachineLost, EXIT_FABRIC, "the other machines tore their parts down"),
        (AcrossMachinesError, EXIT_FABRIC, ""),
        (LeftoversError, EXIT_FAILED, ""),  # says itself to run `ccemu clean`
        ((OvsError, FabricError), EXIT_FABRIC, f"{nothing_left}; `ccemu check` tries a fabric on its own"),
        ((InventoryError, NamespaceError), EXIT_FABRIC, ""),
        (MonitoringError, EXIT_MONITORING, f"{nothing_left}; --no-monitoring runs without"),
        (FanoutError, EXIT_FAILED, ""),
        (ResultsDiskFull, EXIT_DISK_FULL, ""),
    ]


def one_line(exc: Exception) -> int:
    """Print `exc` as the one line a user sees; return its exit status."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):  # wherever it was writing
        print(f"ccemu: no space left to write {exc.filename or 'a file'} ({exc.strerror}): free some space; what "
              "was up is torn down", file=sys.stderr)
        return EXIT_DISK_FULL
    for kind, status, advice in failures():
        if isinstance(exc, kind):
            message = " ".join(str(exc).split())
            print(f"ccemu: {message}{'; ' + advice if advice else ''}", file=sys.stderr)
            return status
    print(f"ccemu: unexpected {type(exc).__name__}: {' '.join(str(exc).split())} "
          "(run `ccemu --debug ...` for the traceback)", file=sys.stderr)
    return EXIT_FAILED
