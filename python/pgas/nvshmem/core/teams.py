"""NVSHMEM4Py's teams: handles (ints) for the predefined teams (``Teams``) and for those split
off, over pgas's ``Team`` objects."""

from typing import Any, Dict, Optional, Tuple

from ... import _pgas

# NVSHMEM_TEAM_CONFIG_MASK_NUM_CONTEXTS: the config's num_contexts applies.
MASK_NUM_CONTEXTS = 1

_teams: Dict[int, Any] = {}


def team_of(handle: Any) -> Any:
    """pgas's ``Team`` for a handle (an int or a ``Teams`` member; a ``pgas.Team`` passes)."""
    if isinstance(handle, _pgas.Team):
        return handle
    if not _teams:
        for t in (_pgas.TEAM_WORLD, _pgas.TEAM_SHARED, _pgas.TEAM_NODE, _pgas.TEAM_SAME_MYPE_NODE):
            _teams[t.handle] = t
    found = _teams.get(int(handle))
    if found is None:
        raise _pgas.TeamError(
            f"team {int(handle)} is not a team of this PE: use a Teams member or a handle that "
            "team_split_strided, team_split_2d or team_init returned (and not destroyed)"
        )
    return found


def _handle(team: Optional[Any]) -> Optional[int]:
    if team is None:
        return None
    _teams[team.handle] = team
    return int(team.handle)


class TeamConfig:
    """NVSHMEM's ``nvshmem_team_config_t``: ``num_contexts`` (applies where the mask has bit
    1) and ``uniqueid`` (for ``team_init``; ``get_team_unique_id`` makes one)."""

    def __init__(self, version: int = 2, num_contexts: int = 0, uniqueid: int = 0) -> None:
        self.version = int(version)
        self.num_contexts = int(num_contexts)
        self.uniqueid = int(uniqueid)

    def __repr__(self) -> str:
        return (
            f"TeamConfig(version={self.version}, num_contexts={self.num_contexts}, "
            f"uniqueid={self.uniqueid})"
        )


def _contexts(config: Optional[TeamConfig], mask: int) -> Optional[int]:
    if config is not None and int(mask) & MASK_NUM_CONTEXTS:
        return config.num_contexts
    return None


TeamUniqueId = int
"""A team id from ``get_team_unique_id`` (a number)."""


def team_get_config(team: Any) -> TeamConfig:
    """``team``'s configuration (``num_contexts``)."""
    return TeamConfig(num_contexts=int(team_of(team).config().get("num_contexts", 0)))


def team_my_pe(team: Any) -> int:
    """This PE's number in ``team``, or -1 when it is not a member."""
    pe = team_of(team).my_pe()
    return -1 if pe is None else int(pe)


def team_n_pes(team: Any) -> int:
    """The number of PEs in ``team``."""
    return int(team_of(team).n_pes())


def team_translate_pe(src_team: Any, src_pe: int, dest_team: Any) -> int:
    """The number in ``dest_team`` of ``src_team``'s PE ``src_pe``, or -1."""
    pe = team_of(src_team).translate_pe(int(src_pe), team_of(dest_team))
    return -1 if pe is None else int(pe)


def team_split_strided(
    parent_team: Any,
    start: int,
    stride: int,
    size: int,
    config: Optional[TeamConfig] = None,
    config_mask: int = 0,
    new_team_name: Optional[str] = None,
) -> Optional[int]:
    """Splits off the ``size`` PEs ``start, start + stride, ...`` of ``parent_team``; the new
    team's handle on its members, ``None`` elsewhere. Collective over the parent team."""
    del new_team_name
    team = team_of(parent_team).split_strided(
        int(start), int(stride), int(size), num_contexts=_contexts(config, config_mask)
    )
    return _handle(team)


def team_split_2d(
    parent_team: Any,
    xrange: int,
    xaxis_config: Optional[TeamConfig] = None,
    xaxis_mask: int = 0,
    yaxis_config: Optional[TeamConfig] = None,
    yaxis_mask: int = 0,
    new_team_name: Optional[str] = None,
) -> Tuple[Optional[int], Optional[int]]:
    """Splits ``parent_team`` into rows of ``xrange`` PEs: this PE's ``(row, column)`` team
    handles. Collective over the parent team."""
    del xaxis_config, xaxis_mask, yaxis_config, yaxis_mask, new_team_name
    x, y = team_of(parent_team).split_2d(int(xrange))
    return _handle(x), _handle(y)


def team_destroy(team: Any) -> None:
    """Destroys a team split off or made by ``team_init``. Collective over the team."""
    t = team_of(team)
    t.destroy()
    _teams.pop(int(t.handle), None)


def get_team_unique_id() -> int:
    """A fresh id for ``team_init``, to hand to the team's other members (in
    ``TeamConfig.uniqueid``)."""
    return int(_pgas.get_team_unique_id())


def team_init(
    team_config: TeamConfig,
    config_mask: int,
    npes: int,
    pe_idx_in_team: int,
    new_team_name: Optional[str] = None,
) -> Optional[int]:
    """Makes a team of ``npes`` PEs from the unique id in ``team_config.uniqueid``, this PE
    being number ``pe_idx_in_team``; returns its handle. pgas checks the members against each
    other first, so every PE of the world calls it: a PE outside the team passes ``npes=0``
    (and gets ``None``). NVSHMEM 3.4.5's own team_init did not return when some PEs joined no
    team (docs/python.md)."""
    del new_team_name
    member = None
    if int(npes) > 0:
        member = (int(team_config.uniqueid), int(pe_idx_in_team), int(npes))
    return _handle(_pgas.team_init(member, num_contexts=_contexts(team_config, config_mask)))

