// One observation (the JSON form of entityrl's Observation) -> the exported model's inputs,
// as entityrl.inference builds them: entities numbered type after type in the observation
// space's order, actors and candidates named by id or by type, masks all-true when absent,
// each image of the space as the model's `image/<name>` input (images.js reads both JSON forms).

import { imageTensor } from "./images.js";

export const CATEGORICAL = "CategoricalActionSpace";
export const GLOBAL = "GlobalCategoricalActionSpace";
export const CONTINUOUS = "ContinuousActionSpace";
export const GLOBAL_CONTINUOUS = "GlobalContinuousActionSpace";

// Whether an action's outputs are a Gaussian's mean and std rather than probabilities.
export function isGaussian(space) {
  return space.kind === CONTINUOUS || space.kind === GLOBAL_CONTINUOUS;
}

// Whether the whole observation takes the action (no actors input).
export function isGlobal(space) {
  return space.kind === GLOBAL || space.kind === GLOBAL_CONTINUOUS;
}

export function idKey(id) {
  return JSON.stringify(id);
}

function range(start, stop) {
  return Array.from({ length: stop - start }, (_, i) => start + i);
}

function boolTable(rows, columns, given, what) {
  const data = new Uint8Array(rows * columns).fill(1);
  if (given != null) {
    const flat = given.flat();
    if (flat.length !== rows * columns) {
      throw new Error(`${what}: expected ${rows}x${columns} flags, got ${flat.length}`);
    }
    flat.forEach((flag, i) => {
      data[i] = flag ? 1 : 0;
    });
  }
  return { type: "bool", data, dims: [rows, columns] };
}

function indices(list) {
  return { type: "int64", data: BigInt64Array.from(list, BigInt), dims: [list.length] };
}

export function observationInputs(obs, spaces) {
  const feeds = {};
  const ids = [];
  const start = {};
  const count = {};
  const visible = [];
  for (const [type, featureNames] of Object.entries(spaces.entities)) {
    const rows = obs.features?.[type] ?? [];
    const width = featureNames.length;
    const data = new Float32Array(rows.length * width);
    rows.forEach((row, i) => {
      if (row.length !== width) {
        throw new Error(`features of ${type}: expected ${width} per entity, got ${row.length}`);
      }
      data.set(row, i * width);
    });
    feeds[`features/${type}`] = { type: "float32", data, dims: [rows.length, width] };
    start[type] = ids.length;
    count[type] = rows.length;
    ids.push(...(obs.ids?.[type] ?? rows.map((_, i) => [type, i])));
    visible.push(...(obs.visible?.[type] ?? rows.map(() => true)));
  }
  if (spaces.global_features.length) {
    const given = obs.global_features ?? [];
    if (given.length !== spaces.global_features.length) {
      throw new Error(`global_features: expected ${spaces.global_features.length}, got ${given.length}`);
    }
    feeds.global_features = {
      type: "float32",
      data: Float32Array.from(given),
      dims: [spaces.global_features.length],
    };
  }
  for (const [name, spec] of Object.entries(spaces.images ?? {})) {
    feeds[`image/${name}`] = imageTensor(name, obs.images?.[name], spec);
  }
  feeds.visible = { type: "bool", data: Uint8Array.from(visible, Number), dims: [ids.length] };

  const position = new Map(ids.map((id, i) => [idKey(id), i]));
  const named = (givenIds, types) => {
    if (givenIds != null) {
      return givenIds.map((id) => {
        const at = position.get(idKey(id));
        if (at === undefined) throw new Error(`an action names unknown entity ${idKey(id)}`);
        return at;
      });
    }
    if (types != null) return types.flatMap((t) => range(start[t], start[t] + (count[t] ?? 0)));
    return range(0, ids.length);
  };

  const offered = {};
  for (const [name, space] of Object.entries(spaces.actions)) {
    const spec = obs.actions?.[name];
    if (isGlobal(space)) {
      // A Gaussian has no mask: every value is legal.
      if (space.kind === GLOBAL) {
        const mask = spec?.mask == null ? null : [spec.mask];
        feeds[`mask/${name}`] = boolTable(1, space.choices.length, mask, name);
      }
      offered[name] = { actors: spec ? [null] : [] };
      continue;
    }
    const actors = spec ? named(spec.actor_ids, spec.actor_types) : [];
    feeds[`actors/${name}`] = indices(actors);
    if (space.kind === CONTINUOUS) {
      offered[name] = { actors: actors.map((i) => ids[i]) };
      continue;
    }
    if (space.kind === CATEGORICAL) {
      feeds[`mask/${name}`] = boolTable(actors.length, space.choices.length, spec?.mask, name);
      offered[name] = { actors: actors.map((i) => ids[i]) };
      continue;
    }
    // Candidates matter only to actors.
    const actees = actors.length ? named(spec.actee_ids, spec.actee_types) : [];
    feeds[`actees/${name}`] = indices(actees);
    feeds[`mask/${name}`] = boolTable(actors.length, actees.length, spec?.mask, name);
    offered[name] = { actors: actors.map((i) => ids[i]), actees: actees.map((i) => ids[i]) };
  }
  return { feeds, offered };
}
