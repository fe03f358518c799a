// PickHeaviest, the environment of the README's "Your own environment", for the browser page:
// a picker selects one of 2-7 boxes; reward 1 if it is the heaviest. Written against the
// page's environment API (docs/deploy.md, "Your own environment in the page"), as any user's
// environment is: serve it with the page and open
//   index.html?env=examples/pick_heaviest.js&model=pick_heaviest.onnx
// The class is exported under the name the Python environment has in the model's metadata.

export class PickHeaviest {
  constructor(kwargs, rng) {
    this.rng = rng;
    this.weights = [];
  }

  reset() {
    const count = 2 + this.rng.integer(6);
    return this.setState({ weights: Array.from({ length: count }, () => 10 * this.rng.next()) });
  }

  // Optional: start from given weights (the page's tests play Python's episodes with it).
  setState({ weights }) {
    this.weights = [...weights];
    return {
      features: { Box: this.weights.map((w) => [w]), Picker: [[]] },
      ids: { Box: this.weights.map((_, i) => i), Picker: ["picker"] },
      actions: { pick: { actor_types: ["Picker"], actee_types: ["Box"] } },
      reward: 0,
      done: false,
    };
  }

  act(actions) {
    const [box] = actions.pick.actees;
    return { reward: this.weights[box] === Math.max(...this.weights) ? 1 : 0, done: true };
  }
}
