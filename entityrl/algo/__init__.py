"""Learning algorithms: advantage estimation, PPO, behaviour cloning."""
