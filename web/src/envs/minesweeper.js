// MineSweeper (entityrl.envs.minesweeper): robots defuse every mine without stepping on one.

const MOVES = [
  [1, 0],
  [-1, 0],
  [0, 1],
  [0, -1],
];
const DEFUSE = 4;

export class MineSweeper {
  constructor(
    {
      width = 6,
      height = 6,
      nmines = 5,
      nrobots = 2,
      orbital_cannon = false,
      cooldown_period = 5,
      max_steps = 100,
    } = {},
    rng,
  ) {
    if (width * height < nmines + nrobots) {
      throw new Error(`MineSweeper: a ${width}x${height} grid cannot hold ${nmines} mines and ${nrobots} robots`);
    }
    Object.assign(this, { width, height, nmines, nrobots, maxSteps: max_steps, rng });
    this.orbitalCannon = orbital_cannon;
    this.cooldownPeriod = cooldown_period;
  }

  reset() {
    const cells = this.rng.choose(this.width * this.height, this.nmines + this.nrobots);
    const positions = cells.map((c) => [c % this.width, Math.floor(c / this.width)]);
    return this.setState({
      mines: positions.slice(0, this.nmines),
      robots: positions.slice(this.nmines),
      cooldown: this.cooldownPeriod,
      orbital_cannon: this.orbitalCannon,
    });
  }

  setState({ mines, robots, cooldown, orbital_cannon }) {
    this.mines = mines.map((m) => [...m]);
    this.robots = robots.map((r) => [...r]);
    this.cooldown = cooldown;
    this.orbitalCannon = orbital_cannon;
    this.steps = 0;
    return this.observe();
  }

  legalMoves(x, y) {
    return [x < this.width - 1, x > 0, y < this.height - 1, y > 0, true];
  }

  observe() {
    const features = { Mine: this.mines, Robot: this.robots };
    if (this.orbitalCannon) features["Orbital Cannon"] = [[this.cooldown]];
    const ids = {};
    for (const [name, rows] of Object.entries(features)) ids[name] = rows.map((_, i) => [name, i]);
    const ready = this.orbitalCannon && this.cooldown === 0 && (this.mines.length || this.robots.length);
    return {
      features: Object.fromEntries(Object.entries(features).map(([k, rows]) => [k, rows.map((r) => [...r])])),
      ids,
      actions: {
        Move: { actor_types: ["Robot"], mask: this.robots.map(([x, y]) => this.legalMoves(x, y)) },
        "Fire Orbital Cannon": {
          actor_types: ready ? ["Orbital Cannon"] : [],
          actee_types: ["Mine", "Robot"],
        },
      },
      done: !this.mines.length || !this.robots.length || this.steps >= this.maxSteps,
      reward: this.mines.length ? 0 : 1,
    };
  }

  act(actions) {
    this.steps += 1;
    this.cooldown = Math.max(this.cooldown - 1, 0);
    let destroyedRobot = null;
    const fire = actions["Fire Orbital Cannon"];
    let mines = [...this.mines];
    if (fire?.actors.length) {
      this.cooldown = this.cooldownPeriod;
      for (const [kind, i] of fire.actees) {
        if (kind === "Mine") mines[i] = null;
        else destroyedRobot = i;
      }
    }
    const move = actions.Move;
    if (move) {
      move.actors.forEach(([, i], k) => {
        const choice = move.indices[k];
        const [x, y] = this.robots[i];
        if (choice === DEFUSE) {
          mines = mines.filter((m) => m === null || Math.abs(m[0] - x) + Math.abs(m[1] - y) > 1);
        } else if (this.legalMoves(x, y)[choice]) {
          this.robots[i] = [x + MOVES[choice][0], y + MOVES[choice][1]];
        }
      });
    }
    this.mines = mines.filter((m) => m !== null);
    if (destroyedRobot !== null) this.robots.splice(destroyedRobot, 1);
    const mined = new Set(this.mines.map((m) => m.join(",")));
    this.robots = this.robots.filter((r) => !mined.has(r.join(",")));
    return this.observe();
  }

  // The grid (y up), mines as red discs, robots as blue squares labelled with their most
  // probable move.
  draw(ctx, decision) {
    const { width, height } = ctx.canvas;
    const cell = Math.min(width / this.width, height / this.height);
    ctx.strokeStyle = "#bbb";
    for (let i = 0; i <= this.width; i++) ctx.strokeRect(i * cell, 0, 0, this.height * cell);
    for (let j = 0; j <= this.height; j++) ctx.strokeRect(0, j * cell, this.width * cell, 0);
    const at = ([x, y]) => [x * cell + cell / 2, (this.height - 1 - y) * cell + cell / 2];
    ctx.fillStyle = "#c22";
    for (const mine of this.mines) {
      const [cx, cy] = at(mine);
      ctx.beginPath();
      ctx.arc(cx, cy, cell / 4, 0, 2 * Math.PI);
      ctx.fill();
    }
    const labels = ["→", "←", "↑", "↓", "✱"];
    const probs = decision?.actions.Move?.probs ?? [];
    this.robots.forEach((robot, i) => {
      const [cx, cy] = at(robot);
      ctx.fillStyle = "#246";
      ctx.fillRect(cx - cell / 3, cy - cell / 3, (2 * cell) / 3, (2 * cell) / 3);
      const p = probs[i];
      if (p) {
        const best = p.indexOf(Math.max(...p));
        ctx.fillStyle = "#fff";
        ctx.font = `${Math.round(cell / 3)}px sans-serif`;
        ctx.fillText(labels[best], cx - cell / 8, cy + cell / 8);
      }
    });
  }

  // No pointer play: the human chooses moves in the action panel.
  actionAt() {
    return null;
  }
}
