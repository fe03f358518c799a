"""entityrl: reinforcement learning on entity-based environments."""

__version__ = "0.1.0"
