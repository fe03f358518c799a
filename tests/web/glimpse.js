// Glimpse (tests/nn/image_envs.py) for the page, written against its environment API
// (docs/deploy.md) as a user's environment with images is: a player walks a row of 4 cells for
// 3 steps, seen by an 8x8 RGB camera (uint8, lit at its column), a 4x4 one-channel float32 heat
// map (warm at its cell) and a 3x3 two-channel float32 radar (the steps taken, over 3). Moving
// right pays 1. The browser tests play it live to see that the page draws each image it feeds
// the policy.

export class Glimpse {
  constructor(kwargs, rng) {
    this.rng = rng;
  }

  reset() {
    return this.setState({ x: this.rng.integer(4), steps: 0 });
  }

  setState({ x, steps = 0 }) {
    this.x = x;
    this.steps = steps;
    return this.observe(0);
  }

  act(actions) {
    const right = actions.move.indices[0];
    this.x = Math.min(Math.max(this.x + (right ? 1 : -1), 0), 3);
    this.steps += 1;
    return this.observe(right);
  }

  // Images as nested arrays [height][width][channels], as the Python environment's arrays are.
  observe(reward) {
    const camera = grid(8, 8, (row, column) => (Math.floor(column / 2) === this.x ? [255, 128, 0] : [0, 0, 0]));
    const heat = grid(4, 4, (row, column) => [row === 1 && column === this.x ? 1 : 0]);
    const radar = grid(3, 3, () => [this.steps / 3, this.steps / 3]);
    return {
      features: { Player: [[this.x, 1]] },
      ids: { Player: ["player"] },
      actions: { move: { actor_types: ["Player"] } },
      images: { camera, heat, radar },
      reward,
      done: this.steps === 3,
    };
  }
}

// A height x width image whose pixel (row, column) is pixel(row, column), a list of channels.
function grid(height, width, pixel) {
  return Array.from({ length: height }, (_, row) => Array.from({ length: width }, (_, column) => pixel(row, column)));
}
