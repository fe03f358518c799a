"""Ray perception in 2-D: rays cast from an agent report the first object each one meets.

An environment whose world is made of round objects (a centre and a radius, of named types)
can give its agent what ML-Agents' ray perception sensor gives: a fan of rays around the
agent's heading, each reporting which type it hit first (one-hot over the detectable types),
whether it hit nothing, and how far along the ray the hit was (a fraction of the ray's length,
1.0 when nothing was hit). With ``sphere_radius`` the cast is a swept circle instead of a line,
so thin gaps between objects are not seen through.

entityrl takes the result in either shape: one entity per ray (``ray_entity`` declares the
type, :meth:`RaySensor.entity_features` fills it; attention then treats the rays as a set and
each ray carries its own direction), or a flat vector of global features (``global_names``,
:meth:`RaySensor.global_features`), as ML-Agents lays it out. Entities that are visible in
full can simply be entities; rays suit worlds where what matters is what is in the way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from entityrl.env.spaces import Entity


@dataclass(frozen=True)
class RaySensor:
    """A fan of ``2 * rays_per_direction + 1`` rays: one along the heading and
    ``rays_per_direction`` on each side, spread evenly up to ``max_degrees`` from it."""

    tags: Sequence[str]
    """The object types the rays tell apart, in one-hot order."""
    rays_per_direction: int = 3
    max_degrees: float = 70.0
    ray_length: float = 20.0
    sphere_radius: float = 0.0
    """Radius of the swept circle (0: thin rays)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", tuple(self.tags))
        if not self.tags or len(set(self.tags)) != len(self.tags):
            raise ValueError(f"RaySensor tags must be distinct and not empty, got {self.tags!r}")
        if self.rays_per_direction < 0:
            raise ValueError(
                f"RaySensor rays_per_direction must be >= 0, got {self.rays_per_direction}"
            )
        if not 0.0 <= self.max_degrees <= 180.0:
            raise ValueError(f"RaySensor max_degrees must be in [0, 180], got {self.max_degrees}")
        if self.ray_length <= 0.0 or self.sphere_radius < 0.0:
            raise ValueError(
                "RaySensor needs ray_length > 0 and sphere_radius >= 0, got "
                f"ray_length={self.ray_length}, sphere_radius={self.sphere_radius}"
            )

    @property
    def num_rays(self) -> int:
        return 2 * self.rays_per_direction + 1

    @property
    def angles(self) -> npt.NDArray[np.float64]:
        """Each ray's angle from the heading in radians, left to right (counter-clockwise
        positive: the first ray is the rightmost)."""
        spread = np.radians(self.max_degrees)
        return np.linspace(-spread, spread, self.num_rays)

    @property
    def ray_feature_names(self) -> tuple[str, ...]:
        """What each ray reports: one-hot over the tags, no hit, hit distance."""
        return (*(f"hit_{tag}" for tag in self.tags), "no_hit", "distance")

    def ray_entity(self) -> Entity:
        """The entity type of :meth:`entity_features`: the ray's direction relative to the
        heading (cosine, sine), then what it reports."""
        return Entity(("direction_cos", "direction_sin", *self.ray_feature_names))

    def global_names(self, prefix: str = "ray") -> list[str]:
        """Names of :meth:`global_features`, ray by ray (``ray0_hit_wall``, ...)."""
        return [
            f"{prefix}{i}_{name}" for i in range(self.num_rays) for name in self.ray_feature_names
        ]

    def cast(
        self,
        origin: npt.ArrayLike,
        heading: float,
        objects: Mapping[str, npt.ArrayLike],
    ) -> npt.NDArray[np.float32]:
        """One row per ray (``num_rays`` x ``len(tags) + 2``).

        ``origin`` is the agent's (x, y); ``heading`` its facing in radians; ``objects`` maps
        tags to ``(n, 3)`` arrays of (x, y, radius). Objects of tags the sensor does not know
        are refused, so a misspelt tag cannot make objects invisible. An object around the
        origin is hit at distance 0."""
        centre = np.asarray(origin, dtype=np.float64)
        if centre.shape != (2,):
            raise ValueError(f"RaySensor.cast: origin must be (x, y), got shape {centre.shape}")
        unknown = set(objects) - set(self.tags)
        if unknown:
            raise ValueError(
                f"RaySensor.cast: objects of tags {sorted(unknown)} are not among the sensor's "
                f"tags {list(self.tags)}"
            )
        angles = heading + self.angles
        directions = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # (rays, 2)
        nearest = np.full(self.num_rays, np.inf)
        nearest_tag = np.full(self.num_rays, -1)
        for index, tag in enumerate(self.tags):
            if tag not in objects:
                continue
            circles = np.asarray(objects[tag], dtype=np.float64).reshape(-1, 3)
            if (circles[:, 2] < 0).any():
                raise ValueError(f"RaySensor.cast: objects of tag {tag!r} have negative radii")
            distance = _first_hits(directions, circles[:, :2] - centre,
                                   circles[:, 2] + self.sphere_radius)  # fmt: skip
            closer = distance < nearest
            nearest[closer] = distance[closer]
            nearest_tag[closer] = index
        hit = nearest <= self.ray_length
        rows = np.zeros((self.num_rays, len(self.tags) + 2), dtype=np.float32)
        rows[np.flatnonzero(hit), nearest_tag[hit]] = 1.0
        rows[:, -2] = ~hit
        rows[:, -1] = np.where(hit, nearest / self.ray_length, 1.0)
        return rows

    def entity_features(
        self, origin: npt.ArrayLike, heading: float, objects: Mapping[str, npt.ArrayLike]
    ) -> npt.NDArray[np.float32]:
        """The rays as entities of :meth:`ray_entity`'s type."""
        angles = self.angles
        directions = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
        return np.concatenate([directions, self.cast(origin, heading, objects)], axis=1)

    def global_features(
        self, origin: npt.ArrayLike, heading: float, objects: Mapping[str, npt.ArrayLike]
    ) -> npt.NDArray[np.float32]:
        """The rays as one flat vector, named by :meth:`global_names`."""
        return self.cast(origin, heading, objects).reshape(-1)


def _first_hits(
    directions: npt.NDArray[np.float64],
    centres: npt.NDArray[np.float64],
    radii: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Distance along each unit ray to its first circle (inf: none ahead). Rays x circles at
    once: the ray meets a circle where the distance from the circle's centre to the ray's line
    is at most its radius; the entry point is the projection minus the half-chord."""
    if len(centres) == 0:
        return np.full(len(directions), np.inf)
    along = directions @ centres.T  # (rays, circles): projection of each centre on each ray
    across_sq = (centres**2).sum(axis=1)[None, :] - along**2
    half_chord_sq = radii[None, :] ** 2 - across_sq
    inside = (centres**2).sum(axis=1) <= radii**2  # the origin lies in the circle
    entry = along - np.sqrt(np.maximum(half_chord_sq, 0.0))
    # From outside a circle, both crossings lie on the same side: ahead when the entry is.
    crossed = (half_chord_sq >= 0) & (entry >= 0)
    distance = np.where(inside[None, :], 0.0, np.where(crossed, entry, np.inf))
    return distance.min(axis=1)
