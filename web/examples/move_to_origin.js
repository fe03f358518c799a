// ContinuousMoveToOrigin (entityrl.envs.move_to_origin) for the browser page: a spaceship starts
// at rest on the unit circle; each step its one "thrust" action, a continuous action of two
// components (horizontal, vertical) each in [-0.01, 0.01], changes its velocity, then it moves
// by its velocity. The reward is how much closer to the origin it got. Written against the
// page's environment API (docs/deploy.md, "Your own environment in the page"), as any user's
// environment is: serve it with the page and open
//   index.html?env=examples/move_to_origin.js&model=move_to_origin.onnx
// With "Human plays" checked, a person enters each step's thrust in the decision table.

const MAX_THRUST = 0.01; // the action space's bounds; the page hands act() values within them
const VIEW = 1.2; // the board shows [-VIEW, VIEW] around the origin, vertically

export class ContinuousMoveToOrigin {
  constructor({ max_steps = 32 } = {}, rng) {
    if (max_steps < 1) throw new Error(`ContinuousMoveToOrigin: max_steps must be >= 1, got ${max_steps}`);
    this.maxSteps = max_steps;
    this.rng = rng;
  }

  reset() {
    const angle = 2 * Math.PI * this.rng.next();
    return this.setState({ position: [Math.cos(angle), Math.sin(angle)], velocity: [0, 0], steps: 0 });
  }

  // Optional: start from a given state (the page's tests play Python's episodes with it).
  setState({ position, velocity = [0, 0], steps = 0 }) {
    this.position = [...position];
    this.velocity = [...velocity];
    this.steps = steps;
    return this.observe(0);
  }

  // actions.thrust: {actors, values}, one [horizontal, vertical] per actor (here the one ship).
  act(actions) {
    for (const [dx, dy] of actions.thrust?.values ?? []) {
      this.velocity[0] += dx;
      this.velocity[1] += dy;
    }
    const before = Math.hypot(...this.position);
    this.position = this.position.map((p, axis) => p + this.velocity[axis]);
    this.steps += 1;
    return this.observe(before - Math.hypot(...this.position));
  }

  // The features in the order of the Python environment's space (x_pos, y_pos, x_velocity,
  // y_velocity, step): the policy reads them by position.
  observe(reward) {
    return {
      features: { Spaceship: [[...this.position, ...this.velocity, this.steps]] },
      actions: { thrust: { actor_types: ["Spaceship"] } },
      reward,
      done: this.steps >= this.maxSteps,
    };
  }

  // Optional: the origin (a ring), the ship, and where its velocity takes it in 10 steps.
  draw(ctx) {
    const { width, height } = ctx.canvas;
    const scale = height / (2 * VIEW);
    const at = ([x, y]) => [width / 2 + x * scale, height / 2 - y * scale];
    ctx.strokeStyle = "#393";
    ctx.beginPath();
    ctx.arc(...at([0, 0]), 6, 0, 2 * Math.PI);
    ctx.stroke();
    const [sx, sy] = at(this.position);
    ctx.strokeStyle = "#246";
    ctx.beginPath();
    ctx.moveTo(sx, sy);
    ctx.lineTo(...at(this.position.map((p, axis) => p + 10 * this.velocity[axis])));
    ctx.stroke();
    ctx.fillStyle = "#c22";
    ctx.beginPath();
    ctx.arc(sx, sy, 7, 0, 2 * Math.PI);
    ctx.fill();
    ctx.fillStyle = "#222";
    ctx.font = "12px sans-serif";
    const distance = Math.hypot(...this.position).toFixed(3);
    ctx.fillText(`step ${this.steps}/${this.maxSteps}, distance ${distance}, thrust per step at most ${MAX_THRUST}`, 8, 16);
  }
}
