"""Places the map's rooms on a grid for drawing: compass moves point the way they say.

Zork's map has no coordinates, only moves ("north of West of House is North of House").
Walking the graph breadth-first from the starting room and putting each newly reached
room one step in the move's direction gives a layout people recognise; when that cell is
taken (Zork's geography is not planar) the room goes to the nearest free cell. Moves that
are not compass directions ("up", "in", "climb tree") use a fixed diagonal offset.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from managers.map_graph import MapGraph

# Screen directions: x grows to the east, y grows to the south.
_STEPS: dict[str, tuple[int, int]] = {
    "north": (0, -1),
    "south": (0, 1),
    "east": (1, 0),
    "west": (-1, 0),
    "northeast": (1, -1),
    "northwest": (-1, -1),
    "southeast": (1, 1),
    "southwest": (-1, 1),
    "up": (1, -1),
    "down": (-1, 1),
    "in": (1, 1),
    "out": (-1, -1),
}
_OTHER_STEP = (1, 1)
WEST_OF_HOUSE = 180  # Zork I's starting room: the layout's anchor when it is known


def step(label: str) -> tuple[int, int]:
    """The grid step (dx, dy) a move label stands for."""
    return _STEPS.get(label, _OTHER_STEP)


@dataclass(frozen=True)
class PlacedRoom:
    id: int
    name: str
    x: int
    y: int


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


def layout(graph: MapGraph, anchor: int | None = None) -> list[PlacedRoom]:
    """Grid positions for every room, normalised so the smallest x and y are 0.

    Rooms unreachable from the anchor (another part of the map seen through a death or
    a teleport) are laid out as their own group to the right.
    """
    if not graph.rooms:
        return []
    # Each move also places its rooms the other way round: B east of A puts A west of B.
    neighbours: dict[int, list[tuple[int, tuple[int, int]]]] = {room_id: [] for room_id in graph.rooms}
    for from_id, routes in graph.edges.items():
        for label, to_id in routes.items():
            if from_id in neighbours and to_id in neighbours and from_id != to_id:
                dx, dy = step(label)
                neighbours[from_id].append((to_id, (dx, dy)))
                neighbours[to_id].append((from_id, (-dx, -dy)))
    start = anchor if anchor in graph.rooms else (WEST_OF_HOUSE if WEST_OF_HOUSE in graph.rooms else min(graph.rooms))
    positions: dict[int, tuple[int, int]] = {}
    taken: set[tuple[int, int]] = set()
    roots = [start, *sorted(set(graph.rooms) - {start})]
    for root in roots:
        if root in positions:
            continue
        right = max((x for x, _ in taken), default=-2) + 2
        queue = deque([root])
        positions[root] = _free_cell_near(right, 0, taken)
        taken.add(positions[root])
        while queue:
            room_id = queue.popleft()
            x, y = positions[room_id]
            for other, (dx, dy) in sorted(neighbours[room_id]):
                if other in positions:
                    continue
                positions[other] = _free_cell_near(x + dx, y + dy, taken)
                taken.add(positions[other])
                queue.append(other)
    min_x = min(x for x, _ in positions.values())
    min_y = min(y for _, y in positions.values())
    return [
        PlacedRoom(room_id, graph.rooms[room_id].name, x - min_x, y - min_y)
        for room_id, (x, y) in sorted(positions.items())
    ]
