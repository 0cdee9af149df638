"""ddprun, a native drop-in for torchrun (https://pytorch.org/docs/stable/elastic/run.html).

The wheel installs the programs (ddprun, ddprun-launch, ddprun-store, ddprun-allreduce-check,
ddprun-allreduce-perf) on the environment's PATH; this package only finds them, so that
`python -m ddprun ARGS` runs `ddprun ARGS` as `python -m torch.distributed.run` runs torchrun.
"""
import os
import sysconfig

__all__ = ["program_path"]


def program_path(name="ddprun"):
    """The installed program NAME, from the scripts folder of the scheme this package came from.

    Raises FileNotFoundError naming the folders searched when it is not there.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    searched = []
    for scheme in sysconfig.get_scheme_names():
        try:
            paths = sysconfig.get_paths(scheme)
        except KeyError:
            continue
        purelib = os.path.abspath(paths.get("platlib", paths.get("purelib", "")))
        if not here.startswith(purelib + os.sep):
            continue
        candidate = os.path.join(paths["scripts"], name)
        searched.append(paths["scripts"])
        if os.access(candidate, os.X_OK):
            return candidate
    default = os.path.join(sysconfig.get_path("scripts"), name)
    if os.access(default, os.X_OK):
        return default
    searched.append(os.path.dirname(default))
    raise FileNotFoundError(
        f"{name} is not installed next to this Python package (looked in {', '.join(searched)}): "
        "reinstall the ddprun wheel with pip")
