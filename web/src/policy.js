// An exported entityrl policy in onnxruntime-web: observations (JSON) in, actions out.

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
  }

  // Per action: probs (one Float32Array row per offered actor), the actors' ids (and the
  // candidates' ids of select-entity actions); and the value.
  async decide(obs) {
    const { feeds, offered } = observationInputs(obs, this.spaces);
    const tensors = {};
    for (const name of this.session.inputNames) {
      const { type, data, dims } = feeds[name];
      tensors[name] = new ort.Tensor(type, data, dims);
    }
    const outputs = await this.session.run(tensors);
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

  // Actions for the environment: each actor's most probable choice, or one drawn with `rng`.
  async act(obs, { rng = null, deterministic = false } = {}) {
    const decision = await this.decide(obs);
    return { actions: toActions(decision, this.spaces, (p) => choose(p, rng, deterministic)), decision };
  }
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
