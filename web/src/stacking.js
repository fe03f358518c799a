// Observation stacking as the trainer's StackedVecEnv and entityrl.inference do it
// (entityrl/env/stacking.py, docs/stacking.md): every feature x becomes x, x@t-1, ...,
// x@t-(k-1); an entity's earlier values are those of the entity of the same type and id on the
// previous step of the episode (by position within its type when the observation gives no
// ids); an entity without one, and every entity of an episode's first step, repeats its
// current values.

import { idKey } from "./inputs.js";

const MATCH = "id";

// The steps an entityrl.stack metadata value declares (0: not stacked), checked as
// entityrl.inference.signature.stack_steps checks it.
export function stackSteps(declared) {
  if (declared == null) return 0;
  let steps, match;
  try {
    ({ steps, match } = JSON.parse(declared));
  } catch (err) {
    throw new Error(`entityrl.stack: expected JSON with "steps" and "match", got ${declared} (${err.message})`);
  }
  if (!Number.isInteger(steps) || steps < 2) {
    throw new Error(`entityrl.stack: expected an integer steps >= 2, got ${JSON.stringify(steps)}`);
  }
  if (match !== MATCH) {
    throw new Error(`entityrl.stack: expected match "${MATCH}" (the only matching this page knows), got ${JSON.stringify(match)}`);
  }
  return steps;
}

function stackedNames(names, k) {
  const earlier = [];
  for (let lag = 1; lag < k; lag++) earlier.push(...names.map((name) => `${name}@t-${lag}`));
  return [...names, ...earlier];
}

function unstackedNames(what, names, k) {
  const current = names.slice(0, names.length / k);
  if (JSON.stringify(stackedNames(current, k)) !== JSON.stringify(names)) {
    throw new Error(`${what}: expected features stacked ${k} deep (x, y, x@t-1, y@t-1, ...), got ${JSON.stringify(names)}`);
  }
  return current;
}

// The spaces of the raw observations that stacking `k` deep turns into `spaces`.
export function unstackedSpaces(spaces, k) {
  const entities = {};
  for (const [type, names] of Object.entries(spaces.entities)) {
    entities[type] = unstackedNames(`entity type ${type}`, names, k);
  }
  const globals = unstackedNames("the global features", spaces.global_features, k);
  return { ...spaces, entities, global_features: globals };
}

// `values` followed by the first (k - 1) * values.length of `earlier`, or by k - 1 copies of
// itself without history.
function stackRow(values, earlier, k) {
  const row = new Array(values.length * k);
  for (let lag = 0; lag < k; lag++) {
    for (let i = 0; i < values.length; i++) {
      row[lag * values.length + i] = lag === 0 || !earlier ? values[i] : earlier[(lag - 1) * values.length + i];
    }
  }
  return row;
}

// [the observation `obs` (raw, of `rawSpaces`) stacked `k` deep onto `history` (null: the
// episode starts with it), the history its next step stacks onto].
export function stackOnto(obs, history, k, rawSpaces) {
  const features = {};
  const entities = {};
  for (const [type, names] of Object.entries(rawSpaces.entities)) {
    const rows = obs.features?.[type] ?? [];
    const ids = obs.ids?.[type];
    const previous = history?.entities[type];
    const seen = new Map();
    features[type] = rows.map((row, i) => {
      if (row.length !== names.length) {
        throw new Error(`features of ${type}: expected ${names.length} per entity, got ${row.length}`);
      }
      const key = ids ? idKey(ids[i]) : String(i);
      const stacked = stackRow(row, previous?.get(key), k);
      seen.set(key, stacked);
      return stacked;
    });
    entities[type] = seen;
  }
  const globals = stackRow(obs.global_features ?? [], history?.global, k);
  return [{ ...obs, features, global_features: globals }, { entities, global: globals }];
}
