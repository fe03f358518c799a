// An exported entityrl policy in onnxruntime-web: observations (JSON) in, actions out. A policy
// with memory (metadata entityrl.state) carries its state from one decision to the next, as
// entityrl.inference does: every decide() or act() is one step of the episode; an episode
// starts from zeros (the first call, after reset(), or with newEpisode).

import * as ort from "../node_modules/onnxruntime-web/dist/ort.wasm.min.mjs";
import { observationInputs } from "./inputs.js";
import { onnxMetadata } from "./onnx_metadata.js";

const FORMAT = "entityrl-policy/1";

ort.env.wasm.wasmPaths = new URL("../node_modules/onnxruntime-web/dist/", import.meta.url).href;
// One decision of a small network is fastest on one thread (and pages without cross-origin
// isolation have no others).
ort.env.wasm.numThreads = 1;

export class Policy {
  static async load(source) {
    const buffer =
      typeof source === "string" ? await (await fetch(source)).arrayBuffer() : source;
    const metadata = onnxMetadata(buffer);
    if (metadata["entityrl.format"] !== FORMAT) {
      throw new Error(
        `not an entityrl policy (entityrl.format is ${metadata["entityrl.format"]}, expected ${FORMAT})`,
      );
    }
    const session = await ort.InferenceSession.create(new Uint8Array(buffer), {
      executionProviders: ["wasm"],
    });
    return new Policy(session, metadata);
  }

  constructor(session, metadata) {
    this.session = session;
    this.spaces = JSON.parse(metadata["entityrl.spaces"]);
    this.env = JSON.parse(metadata["entityrl.env"] ?? "{}");
    this.version = metadata["entityrl.version"];
    const unsupported = unsupportedFeatures(this.spaces, metadata);
    if (unsupported.length) {
      throw new Error(
        `this page cannot run this model: ${unsupported.join("; ")}. Run it with entityrl.inference in Python (docs/deploy.md)`,
      );
    }
    this.stateSize = stateSize(metadata["entityrl.state"]);
    if (this.stateSize && !(session.inputNames.includes("state") && session.outputNames.includes("next_state"))) {
      throw new Error(
        "the metadata declares a state (entityrl.state), but the model lacks the input 'state' or the output 'next_state'",
      );
    }
    // The state to continue the episode from (a Float32Array; null: start one from zeros).
    this.state = null;
  }

  // Forget the episode's state: the next decision starts a new episode.
  reset() {
    this.state = null;
  }

  // Per action: probs (one Float32Array row per offered actor), the actors' ids (and the
  // candidates' ids of select-entity actions); and the value. With memory, one step of the
  // episode (newEpisode: obs is its first observation).
  async decide(obs, { newEpisode = false } = {}) {
    const { feeds, offered } = observationInputs(obs, this.spaces);
    if (this.stateSize) {
      const data = newEpisode || this.state == null ? new Float32Array(this.stateSize) : this.state;
      feeds.state = { type: "float32", data, dims: [this.stateSize] };
    }
    const tensors = {};
    for (const name of this.session.inputNames) {
      const { type, data, dims } = feeds[name];
      tensors[name] = new ort.Tensor(type, data, dims);
    }
    const outputs = await this.session.run(tensors);
    if (this.stateSize) this.state = Float32Array.from(outputs.next_state.data);
    const actions = {};
    for (const name of Object.keys(this.spaces.actions)) {
      const probs = outputs[`probs/${name}`];
      const columns = probs.dims[1];
      const rows = offered[name].actors.length;
      actions[name] = {
        ...offered[name],
        probs: Array.from({ length: rows }, (_, r) =>
          probs.data.slice(r * columns, (r + 1) * columns),
        ),
      };
    }
    return { actions, value: outputs.value.data[0] };
  }

  // Actions for the environment: each actor's most probable choice, or one drawn with `rng`
  // (newEpisode as for decide).
  async act(obs, { rng = null, deterministic = false, newEpisode = false } = {}) {
    const decision = await this.decide(obs, { newEpisode });
    return { actions: toActions(decision, this.spaces, (p) => choose(p, rng, deterministic)), decision };
  }
}

// What the model needs that this page does not do yet: continuous actions (it draws and
// shows choices only) and stacked observations (it feeds one step's features).
export function unsupportedFeatures(spaces, metadata) {
  const found = Object.entries(spaces.actions)
    .filter(([, space]) => space.kind.endsWith("ContinuousActionSpace"))
    .map(([name, space]) => `action '${name}' is continuous (${space.kind})`);
  if (metadata["entityrl.stack"] != null) {
    found.push(`it was trained on stacked observations (entityrl.stack ${metadata["entityrl.stack"]})`);
  }
  return found;
}

// The size of the state a model's entityrl.state metadata declares (0: a model without state).
function stateSize(declared) {
  if (declared == null) return 0;
  const { size, initial } = JSON.parse(declared);
  if (!Number.isInteger(size) || size < 1 || initial !== "zeros") {
    throw new Error(`entityrl.state: expected a positive integer size and initial "zeros", got ${declared}`);
  }
  return size;
}

export function choose(probs, rng, deterministic) {
  if (deterministic || rng == null) {
    let best = 0;
    probs.forEach((p, i) => {
      if (p > probs[best]) best = i;
    });
    return best;
  }
  let total = 0;
  const cumulative = Array.from(probs, (p) => (total += p));
  // In (0, total]: a choice of probability 0 adds no width, so it is never drawn.
  const draw = (1 - rng.next()) * total;
  const pick = cumulative.findIndex((c) => c >= draw);
  return pick < 0 ? probs.length - 1 : pick;
}

// Chosen indices -> the actions an environment takes (entity ids, not indices).
export function toActions(decision, spaces, pick) {
  const actions = {};
  for (const [name, space] of Object.entries(spaces.actions)) {
    const { actors, actees, probs } = decision.actions[name];
    if (!actors.length) continue;
    const chosen = probs.map((p, a) => pick(p, name, a));
    if (space.kind === "GlobalCategoricalActionSpace") {
      actions[name] = { index: chosen[0], label: space.choices[chosen[0]] };
    } else if (space.kind === "CategoricalActionSpace") {
      actions[name] = { actors, indices: chosen };
    } else {
      actions[name] = { actors, actees: chosen.map((j) => actees[j]) };
    }
  }
  return actions;
}
