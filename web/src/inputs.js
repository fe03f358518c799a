// One observation (the JSON form of entityrl's Observation) -> the exported model's inputs,
// as entityrl.inference builds them: entities numbered type after type in the observation
// space's order, actors and candidates named by id or by type, masks all-true when absent.

const CATEGORICAL = "CategoricalActionSpace";
const GLOBAL = "GlobalCategoricalActionSpace";

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
    feeds.global_features = {
      type: "float32",
      data: Float32Array.from(given),
      dims: [spaces.global_features.length],
    };
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
    const choices = space.choices.length;
    if (space.kind === GLOBAL) {
      feeds[`mask/${name}`] = boolTable(1, choices, spec?.mask == null ? null : [spec.mask], name);
      offered[name] = { actors: spec ? [null] : [] };
      continue;
    }
    const actors = spec ? named(spec.actor_ids, spec.actor_types) : [];
    feeds[`actors/${name}`] = indices(actors);
    if (space.kind === CATEGORICAL) {
      feeds[`mask/${name}`] = boolTable(actors.length, choices, spec?.mask, name);
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
