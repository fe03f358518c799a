"""MultiSnake: steer several snakes at once, each eating only food of its own color."""

from __future__ import annotations

from collections.abc import Mapping

from entityrl.env import (
    Action,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    Observation,
    ObsSpace,
)
from entityrl.envs.grid import Cell, sample_free_cells

MOVES = ((0, 1), (0, -1), (-1, 0), (1, 0))  # up, down, left, right


class MultiSnake(Environment):
    """``num_snakes`` snakes of different colors on a ``board_size`` x ``board_size`` board.

    Every snake starts one cell long; for each color one food item lies on the board. Each step
    the snakes move one cell (up, down, left, right) one after another, in snake order. A snake
    that eats food of its color grows by one cell (up to ``max_snake_length``) and earns
    1 / ((max_snake_length - 1) * num_snakes); eaten food reappears on a free cell after all
    snakes moved. The game ends when a snake leaves the board, runs into a snake, or eats food
    of another color; when every snake has reached ``max_snake_length``; or after
    ``max_steps`` steps.
    Optimal return: 1.0 (every snake grows to ``max_snake_length``).
    """

    def __init__(
        self,
        board_size: int = 10,
        num_snakes: int = 2,
        max_snake_length: int = 11,
        max_steps: int = 180,
    ) -> None:
        if num_snakes < 1 or max_snake_length < 2 or max_steps < 1:
            raise ValueError(
                "MultiSnake: need num_snakes >= 1, max_snake_length >= 2 and max_steps >= 1, "
                f"got num_snakes={num_snakes}, max_snake_length={max_snake_length}, "
                f"max_steps={max_steps}"
            )
        if board_size**2 < num_snakes * (max_snake_length + 1):
            raise ValueError(
                f"MultiSnake: a {board_size}x{board_size} board cannot hold {num_snakes} snakes "
                f"of length {max_snake_length} and their food (needs "
                f"{num_snakes * (max_snake_length + 1)} cells)"
            )
        self.board_size = board_size
        self.num_snakes = num_snakes
        self.max_snake_length = max_snake_length
        self.max_steps = max_steps
        self.snakes: list[list[Cell]] = []  # segments of each snake, tail first, head last
        self.food: dict[int, Cell] = {}  # food cell by color
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "SnakeHead": Entity(["x", "y", "color"]),
                "SnakeBody": Entity(["x", "y", "color"]),
                "Food": Entity(["x", "y", "color"]),
            },
            global_features=["step"],
        )

    def action_space(self) -> dict[str, CategoricalActionSpace]:
        return {"move": CategoricalActionSpace(["up", "down", "left", "right"])}

    def occupied(self) -> list[Cell]:
        return [cell for snake in self.snakes for cell in snake] + list(self.food.values())

    def reset(self) -> Observation:
        size, n = self.board_size, self.num_snakes
        cells = sample_free_cells(self.rng, size, size, 2 * n)
        self.snakes = [[cell] for cell in cells[:n]]
        self.food = dict(enumerate(cells[n:]))
        self.steps = 0
        return self.observe(reward=0.0, game_over=False)

    def set_state(self, snakes: list[list[Cell]], food: dict[int, Cell]) -> Observation:
        """Put the environment in a given state (for tests and demonstrations)."""
        self.snakes = [list(s) for s in snakes]
        self.food = dict(food)
        self.steps = 0
        return self.observe(reward=0.0, game_over=False)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.steps += 1
        move = actions.get("move")
        growths = 0
        eaten: list[int] = []
        game_over = False
        if isinstance(move, CategoricalAction):
            for (_, color), choice in zip(move.actors, move.indices.tolist(), strict=True):  # type: ignore[misc]
                snake = self.snakes[color]
                dx, dy = MOVES[choice]
                head = (snake[-1][0] + dx, snake[-1][1] + dy)
                inside = 0 <= head[0] < self.board_size and 0 <= head[1] < self.board_size
                food_color = next((c for c, cell in self.food.items() if cell == head), None)
                if (
                    not inside
                    or any(head in s for s in self.snakes)
                    or food_color not in (None, color)
                ):
                    game_over = True
                    break  # the game is lost; later snakes do not move
                snake.append(head)
                if food_color is not None:
                    del self.food[food_color]
                    eaten.append(food_color)
                if food_color is not None and len(snake) <= self.max_snake_length:
                    growths += 1
                else:
                    snake.pop(0)
        # Food reappears only after every snake moved, so none lands right in front of a snake.
        for color in eaten:
            (self.food[color],) = sample_free_cells(
                self.rng, self.board_size, self.board_size, 1, self.occupied()
            )
        game_over = game_over or all(len(s) >= self.max_snake_length for s in self.snakes)
        reward = growths / ((self.max_snake_length - 1) * self.num_snakes)
        return self.observe(reward, game_over or self.steps >= self.max_steps)

    def observe(self, reward: float, game_over: bool) -> Observation:
        return Observation(
            features={
                "SnakeHead": [(*s[-1], color) for color, s in enumerate(self.snakes)],
                "SnakeBody": [
                    (*cell, color) for color, s in enumerate(self.snakes) for cell in s[:-1]
                ],
                "Food": [(*cell, color) for color, cell in sorted(self.food.items())],
            },
            actions={"move": CategoricalActionMask(actor_types=["SnakeHead"])},
            global_features=[self.steps],
            reward=reward,
            done=game_over,
        )

    def render(self) -> str:
        grid = [["." for _ in range(self.board_size)] for _ in range(self.board_size)]
        for color, (x, y) in self.food.items():
            grid[y][x] = chr(ord("a") + color % 26)
        for color, snake in enumerate(self.snakes):
            for x, y in snake[:-1]:
                grid[y][x] = "="
            x, y = snake[-1]
            grid[y][x] = str(color % 10)
        legend = f"step {self.steps}: heads are digits (snake color), '=' body, letters food (a = color 0)"
        return "\n".join("".join(row) for row in reversed(grid)) + f"\n{legend}"
