// CherryPick (entityrl.envs.cherry_pick): pick the best half of a bowl of cherries, one per step.

export class CherryPick {
  constructor({ num_cherries = 32 } = {}, rng) {
    if (num_cherries < 2) throw new Error(`CherryPick: num_cherries must be >= 2, got ${num_cherries}`);
    this.numCherries = num_cherries;
    this.rng = rng;
    this.cherries = [];
    this.steps = 0;
  }

  get numPicks() {
    return Math.floor(this.numCherries / 2);
  }

  // Normal qualities, shifted so that the best half sums to exactly 1.
  reset() {
    const quality = Array.from({ length: this.numCherries }, () => this.rng.normal());
    const best = [...quality].sort((a, b) => b - a).slice(0, this.numPicks);
    const shift = (1 - best.reduce((a, b) => a + b, 0)) / this.numPicks;
    return this.setState({ cherries: quality.map((q) => q + shift), steps: 0 });
  }

  setState({ cherries, steps = 0 }) {
    this.cherries = [...cherries];
    this.steps = steps;
    return this.observe(0);
  }

  act(actions) {
    let reward = 0;
    const pick = actions["Pick Cherry"];
    if (pick) {
      for (const [, index] of pick.actees) reward += this.cherries.splice(index, 1)[0];
    }
    this.steps += 1;
    return this.observe(reward);
  }

  observe(reward) {
    return {
      features: { Cherry: this.cherries.map((q) => [q]), Player: [[]] },
      actions: { "Pick Cherry": { actor_types: ["Player"], actee_types: ["Cherry"] } },
      reward,
      done: this.steps >= this.numPicks,
    };
  }

  // Cherries as bars (height: quality), each tinted by the agent's probability of picking it.
  draw(ctx, decision) {
    const { width, height } = ctx.canvas;
    const probs = decision?.actions["Pick Cherry"]?.probs[0] ?? [];
    const slot = width / Math.max(this.cherries.length, 1);
    const middle = height / 2;
    const scale = height / 6;
    ctx.strokeStyle = "#888";
    ctx.beginPath();
    ctx.moveTo(0, middle);
    ctx.lineTo(width, middle);
    ctx.stroke();
    this.cherries.forEach((q, i) => {
      const p = probs[i] ?? 0;
      ctx.fillStyle = `rgb(${Math.round(120 + 135 * p)}, 30, ${Math.round(60 * (1 - p))})`;
      const top = q > 0 ? middle - q * scale : middle;
      ctx.fillRect(i * slot + 2, top, slot - 4, Math.abs(q) * scale);
      ctx.fillStyle = "#222";
      ctx.font = "11px sans-serif";
      ctx.fillText(`${Math.round(100 * p)}%`, i * slot + 2, height - 4);
    });
  }

  // A click picks the cherry under it (the human plays).
  actionAt(x, y, width) {
    const index = Math.floor((x / width) * this.cherries.length);
    if (index < 0 || index >= this.cherries.length) return null;
    return { "Pick Cherry": { actors: [["Player", 0]], actees: [["Cherry", index]] } };
  }
}
