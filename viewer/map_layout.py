"""Places the map's rooms on a grid for drawing, from the directions the game engine reports.

Zork's map has no coordinates, only moves ("north of West of House is North of House").
Walking the graph breadth-first from the starting room and putting each newly reached room
one step in the move's direction gives north up and east right. Compass moves are walked
before the others, so they decide where rooms go; "up", "down", "in", "out" and moves that
are not directions ("climb tree") take a free cell nearby and are drawn with their name.

Zork's geography is not planar (going west from Behind House into the Kitchen lands where
North of House already is). When a compass move cannot be drawn pointing its way, the room
goes to the nearest free cell and ``misfits`` lists that move, so the page can say the
game's map contradicts itself there instead of overlapping two rooms.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from world.map_graph import MapGraph

# Screen directions: x grows to the east, y grows to the south.
COMPASS: dict[str, tuple[int, int]] = {
    "north": (0, -1),
    "south": (0, 1),
    "east": (1, 0),
    "west": (-1, 0),
    "northeast": (1, -1),
    "northwest": (-1, -1),
    "southeast": (1, 1),
    "southwest": (-1, 1),
}
# Where a move that is not a compass direction prefers to put its room (it is labelled anyway).
_OTHER: dict[str, tuple[int, int]] = {"up": (1, -1), "down": (-1, 1), "in": (1, 1), "out": (-1, -1)}
_OTHER_STEP = (1, 1)
WEST_OF_HOUSE = 180  # Zork I's starting room: the layout's anchor when it is known


def step(label: str) -> tuple[int, int]:
    """The grid step (dx, dy) a move label stands for."""
    return COMPASS.get(label) or _OTHER.get(label, _OTHER_STEP)


def is_compass(label: str) -> bool:
    return label in COMPASS


def points_its_way(label: str, dx: int, dy: int) -> bool:
    """Whether a drawn offset (dx, dy) between two rooms shows the compass move ``label``:
    north is straight up, northeast up and to the right, and so on."""
    return (_sign(dx), _sign(dy)) == COMPASS[label]


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


@dataclass(frozen=True)
class PlacedRoom:
    id: int
    name: str
    x: int
    y: int


@dataclass(frozen=True)
class Misfit:
    """A compass move the drawing cannot show pointing its way."""

    from_id: int
    label: str
    to_id: int


def _free_cell_near(x: int, y: int, taken: set[tuple[int, int]]) -> tuple[int, int]:
    """The free cell closest to (x, y), searching rings of growing radius."""
    radius = 0
    while True:
        ring = [
            (x + dx, y + dy)
            for dx in range(-radius, radius + 1)
            for dy in range(-radius, radius + 1)
            if max(abs(dx), abs(dy)) == radius
        ]
        ring.sort(key=lambda cell: (abs(cell[0] - x) + abs(cell[1] - y), cell[1], cell[0]))
        for cell in ring:
            if cell not in taken:
                return cell
        radius += 1


def _moves(graph: MapGraph) -> list[tuple[int, str, int]]:
    """Every way between two different known rooms: moves made, then ways the engine's probe found."""
    moves = []
    for edges in (graph.edges, graph.probed_edges()):
        for from_id, routes in sorted(edges.items()):
            for label, to_id in sorted(routes.items()):
                if from_id != to_id and from_id in graph.rooms and to_id in graph.rooms:
                    moves.append((from_id, label, to_id))
    return moves


def layout(graph: MapGraph, anchor: int | None = None) -> list[PlacedRoom]:
    """Grid positions for every room, normalised so the smallest x and y are 0.

    Rooms unreachable from the anchor (another part of the map seen through a death or
    a teleport) are laid out as their own group to the right.
    """
    if not graph.rooms:
        return []
    # Each move also places its rooms the other way round: B east of A puts A west of B.
    # (rank, other room, step): compass moves (rank 0) are followed before the others.
    neighbours: dict[int, list[tuple[int, int, tuple[int, int]]]] = {room_id: [] for room_id in graph.rooms}
    for from_id, label, to_id in _moves(graph):
        dx, dy = step(label)
        rank = 0 if is_compass(label) else 1
        neighbours[from_id].append((rank, to_id, (dx, dy)))
        neighbours[to_id].append((rank, from_id, (-dx, -dy)))
    start = anchor if anchor in graph.rooms else (WEST_OF_HOUSE if WEST_OF_HOUSE in graph.rooms else min(graph.rooms))
    positions: dict[int, tuple[int, int]] = {}
    taken: set[tuple[int, int]] = set()
    for root in [start, *sorted(set(graph.rooms) - {start})]:
        if root in positions:
            continue
        right = max((x for x, _ in taken), default=-2) + 2
        positions[root] = _free_cell_near(right, 0, taken)
        taken.add(positions[root])
        # Two queues: every compass move within reach is placed before any other kind of move.
        queues: tuple[deque[int], deque[int]] = (deque([root]), deque())
        expanded: set[tuple[int, int]] = set()
        while queues[0] or queues[1]:
            rank = 0 if queues[0] else 1
            room_id = queues[rank].popleft()
            if (room_id, rank) in expanded:
                continue
            expanded.add((room_id, rank))
            x, y = positions[room_id]
            for move_rank, other, (dx, dy) in sorted(neighbours[room_id]):
                if move_rank != rank:
                    continue
                if other not in positions:
                    positions[other] = _free_cell_near(x + dx, y + dy, taken)
                    taken.add(positions[other])
                    queues[0].append(other)
                    queues[1].append(other)
            if rank == 0:
                queues[1].append(room_id)
    min_x = min(x for x, _ in positions.values())
    min_y = min(y for _, y in positions.values())
    return [
        PlacedRoom(room_id, graph.rooms[room_id].name, x - min_x, y - min_y)
        for room_id, (x, y) in sorted(positions.items())
    ]


def misfits(graph: MapGraph, placed: list[PlacedRoom]) -> list[Misfit]:
    """The observed compass moves the layout cannot draw pointing their way."""
    where = {room.id: (room.x, room.y) for room in placed}
    found = []
    for from_id, routes in sorted(graph.edges.items()):
        for label, to_id in sorted(routes.items()):
            if not is_compass(label) or from_id == to_id or from_id not in where or to_id not in where:
                continue
            (ax, ay), (bx, by) = where[from_id], where[to_id]
            if not points_its_way(label, bx - ax, by - ay):
                found.append(Misfit(from_id, label, to_id))
    return found
