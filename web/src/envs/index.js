// The environments whose rules the page knows, by their entityrl names: the built-in ones,
// and those a page or script registers (docs/deploy.md, "Your own environment").
import { CherryPick } from "./cherry_pick.js";
import { MineSweeper } from "./minesweeper.js";

export const ENVIRONMENTS = { CherryPick, MineSweeper };

// The methods the page calls on every environment (draw, actionAt and setState are optional).
const REQUIRED = ["reset", "act"];

// Registers `Env` (a class, constructed as new Env(kwargs, rng)) for models trained on the
// entityrl environment `id`.
export function registerEnvironment(id, Env) {
  if (!isEnvironment(Env)) {
    throw new Error(`environment ${id}: expected a class with methods ${REQUIRED.join(" and ")}, got ${typeof Env}`);
  }
  ENVIRONMENTS[id] = Env;
}

function isEnvironment(value) {
  return typeof value === "function" && REQUIRED.every((m) => typeof value.prototype?.[m] === "function");
}

// Registers every environment class (one with reset and act) that the ES module at `url`
// (`name` in messages) exports, under its export name. Returns the names registered. Only
// modules of the page's own site: a link to the page must not be able to run someone else's
// code in it.
export async function importEnvironments(url, name = url) {
  const where = new URL(url, document.baseURI);
  if (where.origin !== location.origin) {
    throw new Error(`${name} is not on this site (${location.origin}): serve your environment beside the page`);
  }
  const module = await import(where.href);
  const classes = Object.entries(module).filter(([, value]) => isEnvironment(value));
  if (!classes.length) {
    throw new Error(`${name} exports no environment class (expected a class with methods ${REQUIRED.join(" and ")})`);
  }
  for (const [id, Env] of classes) registerEnvironment(id, Env);
  return classes.map(([id]) => id);
}
