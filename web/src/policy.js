// An exported entityrl policy in onnxruntime-web: observations (JSON) in, actions out, as
// entityrl.inference decides. A policy with memory (metadata entityrl.state) or trained on
// stacked observations (entityrl.stack) carries its episode from one decision to the next:
// every decide() or act() is one step of the episode; an episode starts afresh (state zeros,
// no history) with the first call, after reset(), or with newEpisode.

import * as ort from "../node_modules/onnxruntime-web/dist/ort.wasm.min.mjs";
import { CATEGORICAL, CONTINUOUS, GLOBAL, isGaussian, observationInputs } from "./inputs.js";
import { onnxMetadata } from "./onnx_metadata.js";
import { stackOnto, stackSteps, unstackedSpaces } from "./stacking.js";

const FORMAT = "entityrl-policy/1";

ort.env.wasm.wasmPaths = new URL("../node_modules/onnxruntime-web/dist/", import.meta.url).href;
// One decision of a small network is fastest on one thread (and pages without cross-origin
// isolation have no others).
ort.env.wasm.numThreads = 1;

// The bytes at `url`; an HTTP error (a mistyped ?model=, say) is named as such rather than
// handed to the model parser as if it were a model.
async function download(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText} for ${url}`);
  return response.arrayBuffer();
}

export class Policy {
  static async load(source) {
    const buffer = typeof source === "string" ? await download(source) : source;
    const metadata = onnxMetadata(buffer);
    const format = metadata["entityrl.format"];
    if (format !== FORMAT) {
      const found = format == null ? "its metadata has no entityrl.format" : `entityrl.format is ${format}`;
      throw new Error(`not an entityrl policy: ${found}, expected ${FORMAT} (export one with \`entityrl export RUN_DIR\`)`);
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
    // With stacking the model takes stacked features and the page is given raw ones.
    this.stack = stackSteps(metadata["entityrl.stack"]);
    this.obsSpaces = this.stack ? unstackedSpaces(this.spaces, this.stack) : this.spaces;
    this.stateSize = stateSize(metadata["entityrl.state"]);
    if (this.stateSize && !(session.inputNames.includes("state") && session.outputNames.includes("next_state"))) {
      throw new Error(
        "the metadata declares a state (entityrl.state), but the model lacks the input 'state' or the output 'next_state'",
      );
    }
    this.reset();
  }

  // What the episode carries into its next step: the state (a Float32Array) and the stacking
  // history; null: the next decision starts an episode.
  get episode() {
    return this.state == null && this.history == null ? null : { state: this.state, history: this.history };
  }

  set episode(carried) {
    this.state = carried?.state ?? null;
    this.history = carried?.history ?? null;
  }

  // Forget the episode: the next decision starts a new one.
  reset() {
    this.episode = null;
  }

  // Per action: the actors' ids (and the candidates' ids of select-entity actions) and either
  // probs (one Float32Array row per offered actor) or, for a continuous action, mean (one row
  // per actor) and std (one per component, shared); and the value. With memory or stacking,
  // one step of the episode (newEpisode: obs is its first observation).
  async decide(obs, { newEpisode = false } = {}) {
    const fresh = newEpisode || this.episode == null;
    let history = null;
    if (this.stack) [obs, history] = stackOnto(obs, fresh ? null : this.history, this.stack, this.obsSpaces);
    const { feeds, offered } = observationInputs(obs, this.spaces);
    if (this.stateSize) {
      const data = fresh ? new Float32Array(this.stateSize) : this.state;
      feeds.state = { type: "float32", data, dims: [this.stateSize] };
    }
    const tensors = {};
    for (const name of this.session.inputNames) {
      const { type, data, dims } = feeds[name];
      tensors[name] = new ort.Tensor(type, data, dims);
    }
    const outputs = await this.session.run(tensors);
    // Kept only once the model has run: a failing call leaves the episode as it was.
    if (this.stateSize) this.state = Float32Array.from(outputs.next_state.data);
    if (this.stack) this.history = history;
    const actions = {};
    for (const [name, space] of Object.entries(this.spaces.actions)) {
      const rows = offered[name].actors.length;
      if (isGaussian(space)) {
        const std = Float32Array.from(outputs[`std/${name}`].data);
        actions[name] = { ...offered[name], mean: tableRows(outputs[`mean/${name}`], rows), std };
      } else {
        actions[name] = { ...offered[name], probs: tableRows(outputs[`probs/${name}`], rows) };
      }
    }
    return { actions, value: outputs.value.data[0] };
  }

  // Actions for the environment: each actor's most probable choice (a continuous action's
  // mean), or one drawn with `rng` (newEpisode as for decide).
  async act(obs, { rng = null, deterministic = false, newEpisode = false } = {}) {
    const decision = await this.decide(obs, { newEpisode });
    const pick = (p) => choose(p, rng, deterministic);
    const draw = (mean, std) => gaussianValues(mean, std, rng, deterministic);
    return { actions: toActions(decision, this.spaces, pick, draw), decision };
  }
}

// The first `rows` rows of a 2-d output tensor, each a Float32Array.
function tableRows(tensor, rows) {
  const columns = tensor.dims[1];
  return Array.from({ length: rows }, (_, r) => tensor.data.slice(r * columns, (r + 1) * columns));
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

// A continuous action's values: the mean, or drawn from the Gaussian (as entityrl.inference
// draws them; the caller clips them to the bounds).
export function gaussianValues(mean, std, rng, deterministic) {
  if (deterministic || rng == null) return Array.from(mean);
  return Array.from(mean, (m, i) => m + std[i] * rng.normal());
}

// Clipped to [low, high] component by component, as the environment receives continuous
// values in training (entityrl/env/actions/continuous.py).
function clipped(values, space) {
  return values.map((v, i) => Math.min(Math.max(v, space.low[i]), space.high[i]));
}

// Chosen indices (pick(probs, name, actor)) and continuous values (draw(mean, std, name,
// actor)) -> the actions an environment takes (entity ids, not indices; values clipped).
export function toActions(decision, spaces, pick, draw = (mean) => Array.from(mean)) {
  const actions = {};
  for (const [name, space] of Object.entries(spaces.actions)) {
    const { actors, actees, probs, mean, std } = decision.actions[name];
    if (!actors.length) continue;
    if (isGaussian(space)) {
      const values = mean.map((m, a) => clipped(draw(m, std, name, a), space));
      actions[name] = space.kind === CONTINUOUS ? { actors, values } : { values: values[0] };
      continue;
    }
    const chosen = probs.map((p, a) => pick(p, name, a));
    if (space.kind === GLOBAL) {
      actions[name] = { index: chosen[0], label: space.choices[chosen[0]] };
    } else if (space.kind === CATEGORICAL) {
      actions[name] = { actors, indices: chosen };
    } else {
      actions[name] = { actors, actees: chosen.map((j) => actees[j]) };
    }
  }
  return actions;
}
