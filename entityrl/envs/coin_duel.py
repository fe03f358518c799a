"""CoinDuel: two players race for coins on a small grid, and may zap each other to take one."""

from __future__ import annotations

from entityrl.env import (
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.envs.grid import MOVES_OR_STAY, Cell, draw_grid, sample_free_cells, step_within
from entityrl.envs.in_play import check_in_play, global_choice

ACTIONS = (*MOVES_OR_STAY, "zap")
ZAP = ACTIONS.index("zap")
PLAYERS = ("0", "1")


class CoinDuel(MultiPlayerEnvironment):
    """Players "0" and "1" on a ``size`` x ``size`` grid with ``num_coins`` coins, all placed
    at random distinct cells. Both roles are the same: each player sees itself as ``Self``
    (x, y, coins, steps it is still stunned), the other as ``Opponent`` (the same, and its
    position relative to ``Self``), the coins as ``Coin`` (x, y, relative x, relative y), and
    the steps left.

    Each step both players act at once (global ``move``: stay, up, down, left, right, zap).
    Zaps land first: a player next to the other (Manhattan distance 1), neither stunned, may
    zap it, taking one of its coins and stunning it: the stunned player's actions are
    ignored for ``stun_steps`` steps, that one included (its mask allows only stay); two zaps
    at once take a coin each (of the coins held before). Then moves (off the grid is
    staying): players block each other, so when both enter the same cell, or swap cells, or
    one enters the cell of one that stays, the mover(s) stay where they were. A player ending
    on a coin picks it up. Each step's shaping reward is ``coin_reward`` times the change of
    the player's lead in coins (a pickup: +-``coin_reward``; a zap that takes a coin: twice
    that); over a game it sums to less than a win. The game ends when the last coin is
    picked up or after ``max_steps`` steps; then the player with more coins gets +1 and the
    other -1 (0 each for a draw).
    Every return is zero-sum; metrics ``coins`` and ``outcome`` (+1, 0, -1) at the end.

    Scripted baselines (``python benchmarks/multiplayer_baselines.py``: 2,000 games with
    default arguments, seed 0, seats alternating; wins/draws/losses of the first named):
    :func:`~entityrl.envs.players.coin_duel_heuristic` (walk to the nearest coin, never zap)
    against a uniformly random player wins 98.0% (0.2% draws); against itself 43.4/11.5/45.1%
    (even: Elo -6, 95% interval [-21, +8]);
    :func:`~entityrl.envs.players.coin_duel_hunter` (chase and zap it) against the heuristic
    wins 84.4% (7.0% draws), about +340 Elo.
    Optimal return: 0.0 against an equally strong opponent (a symmetric zero-sum game); up to
    1 + ``num_coins`` * ``coin_reward`` (1.5) in a game won with every coin.
    """

    def __init__(
        self,
        size: int = 7,
        num_coins: int = 5,
        max_steps: int = 30,
        coin_reward: float = 0.1,
        stun_steps: int = 3,
    ) -> None:
        if size < 2:
            raise ValueError(f"CoinDuel: size must be >= 2, got {size}")
        if num_coins < 1 or num_coins + 2 > size * size:
            raise ValueError(
                f"CoinDuel: num_coins must be between 1 and {size * size - 2} (the cells of a "
                f"{size}x{size} grid left by the players), got {num_coins}"
            )
        if max_steps < 1:
            raise ValueError(f"CoinDuel: max_steps must be >= 1, got {max_steps}")
        if not 0.0 <= coin_reward < 1.0 / num_coins:
            raise ValueError(
                f"CoinDuel: coin_reward must be >= 0 and below 1/num_coins = {1.0 / num_coins:g} "
                f"(all coins' shaping smaller than a win), got {coin_reward}"
            )
        if stun_steps < 1:
            raise ValueError(f"CoinDuel: stun_steps must be >= 1, got {stun_steps}")
        self.size = size
        self.num_coins = num_coins
        self.max_steps = max_steps
        self.coin_reward = coin_reward
        self.stun_steps = stun_steps
        self.positions: list[Cell] = []
        self.coins: list[Cell] = []
        self.scores = [0, 0]
        self.stunned = [0, 0]  # steps each player still loses to a zap
        self.steps = 0
        self.in_play: tuple[str, ...] = ()

    def players(self) -> tuple[str, ...]:
        return PLAYERS

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={
                "Self": Entity(["x", "y", "coins", "stunned"]),
                "Opponent": Entity(["x", "y", "coins", "stunned", "dx", "dy"]),
                "Coin": Entity(["x", "y", "dx", "dy"]),
            },
            global_features=["steps_left"],
        )

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"move": GlobalCategoricalActionSpace(list(ACTIONS))}

    def reset(self) -> dict[str, Observation]:
        cells = sample_free_cells(self.rng, self.size, self.size, 2 + self.num_coins)
        return self.set_state(cells[:2], cells[2:])

    def set_state(self, positions: list[Cell], coins: list[Cell]) -> dict[str, Observation]:
        """Start a game from given positions of the players and coins (tests, demonstrations)."""
        self.positions = list(positions)
        self.coins = list(coins)
        self.scores = [0, 0]
        self.stunned = [0, 0]
        self.steps = 0
        self.in_play = PLAYERS
        return {p: self.observe(i, 0.0, done=False) for i, p in enumerate(PLAYERS)}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        check_in_play("CoinDuel", actions, self.in_play)
        old, before = self.positions, list(self.scores)
        chosen = [global_choice("CoinDuel", p, actions[p], "move") for p in PLAYERS]
        # Zaps land before anyone moves; a stunned player's choice is ignored.
        acting = [self.stunned[i] == 0 for i in range(2)]
        reach = distance(old[0], old[1]) == 1
        zaps = [acting[0] and acting[1] and reach and chosen[i] == "zap" for i in range(2)]
        self.stunned = [max(self.stunned[i] - 1, 0) for i in range(2)]
        for i in range(2):
            if zaps[1 - i]:
                acting[i] = False
                self.stunned[i] = self.stun_steps - 1
                # From the coins held before the step, so two zaps at once stay symmetric.
                taken = min(before[i], 1)
                self.scores[i] -= taken
                self.scores[1 - i] += taken
        targets = [
            step_within(old[i], chosen[i], self.size, self.size)
            if acting[i] and chosen[i] != "zap"
            else old[i]
            for i in range(2)
        ]
        self.positions = resolve_moves(old, targets)
        for i, cell in enumerate(self.positions):
            if cell in self.coins:
                self.coins.remove(cell)
                self.scores[i] += 1
        self.steps += 1
        over = not self.coins or self.steps >= self.max_steps
        gain = [self.scores[i] - before[i] for i in range(2)]
        rewards = [self.coin_reward * (gain[i] - gain[1 - i]) for i in range(2)]
        if over:
            self.in_play = ()
            outcome = (self.scores[0] > self.scores[1]) - (self.scores[0] < self.scores[1])
            rewards = [rewards[0] + outcome, rewards[1] - outcome]
        return {p: self.observe(i, rewards[i], done=over) for i, p in enumerate(PLAYERS)}

    def observe(self, me: int, reward: float, done: bool) -> Observation:
        (x, y), (ox, oy) = self.positions[me], self.positions[1 - me]
        mine, theirs = self.scores[me], self.scores[1 - me]
        outcome = float((mine > theirs) - (mine < theirs))
        metrics = {"coins": float(mine), "outcome": outcome} if done else {}
        return Observation(
            features={
                "Self": [(x, y, mine, self.stunned[me])],
                "Opponent": [(ox, oy, theirs, self.stunned[1 - me], ox - x, oy - y)],
                "Coin": [(cx, cy, cx - x, cy - y) for cx, cy in self.coins],
            },
            global_features=[self.max_steps - self.steps],
            actions={"move": GlobalCategoricalActionMask(self.legal(me))},
            reward=reward,
            done=done,
            metrics=metrics,
        )

    def legal(self, me: int) -> list[bool]:
        """Staying only, while stunned; zapping only next to a player that is not stunned."""
        if self.stunned[me]:
            return [choice == "stay" for choice in ACTIONS]
        can_zap = not self.stunned[1 - me] and distance(*self.positions) == 1
        return [True] * ZAP + [can_zap]

    def render(self) -> str:
        symbols = dict.fromkeys(self.coins, "$") | dict(zip(self.positions, PLAYERS, strict=True))
        return draw_grid(self.size, self.size, symbols) + (
            f"\nstep {self.steps}/{self.max_steps}: coins {self.scores[0]}-{self.scores[1]}, "
            "$ coin, digits players"
        )


def distance(a: Cell, b: Cell) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def resolve_moves(old: list[Cell], targets: list[Cell]) -> list[Cell]:
    """Where two players end up from cells ``old`` heading for ``targets``: a player entering
    the cell the other also enters, or swapping with it, or entering the cell of one that
    stays, stays where it was."""
    (a, b), (ta, tb) = old, targets
    if ta == tb or (ta == b and tb == a):
        return [a, b]
    return [a if ta == b == tb else ta, b if tb == a == ta else tb]
