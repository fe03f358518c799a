// The page: load an exported policy, let it (or a human) play the environment it was trained
// on (its entities, and each image of the observation), show its action probabilities; replay
// recorded episodes. `window.entityrl` exposes the same pieces to scripts and tests. Every
// failure ends in a visible message (the play section's status line, or the replay's), never
// only in the console.

import { EntityView, tableWith } from "./entity_view.js";
import { importEnvironments, registerEnvironment } from "./envs/index.js";
import { showImages } from "./images.js";
import { makeEnvironment, playEpisodes, runRules, timeDecisions } from "./play.js";
import { Policy, choose, gaussianValues, toActions } from "./policy.js";
import { Random } from "./random.js";
import { Replay } from "./replay.js";
import { showDecision } from "./view.js";

const $ = (id) => document.getElementById(id);
const page = {
  policy: null,
  env: null,
  // Why there is no environment to play (shown by every button that needs one).
  noEnv: "no policy loaded",
  view: null,
  obs: null,
  decision: null,
  // Reads the continuous values a person entered in the decision's tables (view.js).
  entered: null,
  total: 0,
  timer: null,
  rng: new Random(1),
};

function status(text, error = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

// `handler`, its errors shown in the status line (prefixed with `what`).
function guarded(what, handler) {
  return async (...args) => {
    try {
      return await handler(...args);
    } catch (err) {
      stopRunning();
      status(`${what}: ${err.message}`, true);
    }
  };
}

function idText(id) {
  return typeof id === "string" ? id : JSON.stringify(id);
}

// Nothing of the last policy's episode left on the page.
function clearBoard() {
  const ctx = $("board").getContext("2d");
  ctx.clearRect(0, 0, ctx.canvas.width, ctx.canvas.height);
  for (const id of ["board-legend", "board-images", "board-entities", "decision"]) $(id).replaceChildren();
}

async function usePolicy(source, label) {
  Object.assign(page, { policy: null, env: null, view: null, obs: null, decision: null });
  stopRunning();
  clearBoard();
  try {
    page.policy = await Policy.load(source);
  } catch (err) {
    page.noEnv = "no policy loaded";
    $("model-info").textContent = `${label}: not loaded`;
    throw err;
  } finally {
    document.body.dataset.ready = "true";
  }
  const { id, kwargs } = page.policy.env;
  $("model-info").textContent = `${label}: ${id} ${JSON.stringify(kwargs ?? {})}, entityrl ${page.policy.version}`;
  await useEnvironment();
  return page.policy;
}

// The policy's environment, from the rules the page has for it (a message where it has none).
async function useEnvironment() {
  try {
    page.env = makeEnvironment(page.policy.env, page.rng);
  } catch (err) {
    page.noEnv = err.message;
    status(err.message, true);
    return;
  }
  // The generic view draws environments that do not draw themselves.
  page.view = page.env.draw ? null : new EntityView($("board"), $("board-legend"), page.policy.obsSpaces, liveLabel);
  await reset();
}

// Registers the environments of the module at `url` (`name` in messages); a policy waiting
// for one of them starts playing it.
async function addEnvironments(url, name) {
  await importEnvironments(url, name);
  if (page.policy && !page.env) await useEnvironment();
}

function liveLabel(type, i) {
  const id = page.obs.ids?.[type]?.[i];
  return id === undefined ? `${type} ${i}` : idText(id);
}

function requireEnv() {
  if (!page.env) throw new Error(page.noEnv);
}

async function reset() {
  requireEnv();
  page.obs = page.env.reset();
  page.total = 0;
  page.policy.reset();
  await refresh();
}

// Decide for the current observation: with memory or stacking, one step of the episode, so
// only when the observation is new (see show()). An episode's final observation gets no
// decision: nothing acts on it, and it may lack any field (its images too, which the model
// would refuse).
async function refresh() {
  page.decision = page.obs.done ? null : await page.policy.decide(page.obs);
  show();
}

function show() {
  const ctx = $("board").getContext("2d");
  ctx.clearRect(0, 0, ctx.canvas.width, ctx.canvas.height);
  if (page.view) {
    page.view.draw(page.obs);
    const table = tableWith(["id", "type", "features"]);
    page.view.listEntities(table, page.obs);
    $("board-entities").replaceChildren(table);
  } else {
    page.env.draw(ctx, page.decision);
  }
  // The images the policy was given (with stacking, the current step's: they are not stacked).
  showImages($("board-images"), page.policy.obsSpaces, page.obs);
  if (!page.decision) {
    $("decision").replaceChildren();
    page.entered = () => ({});
    status(`return so far ${page.total.toFixed(3)} (episode over: Reset)`);
    return;
  }
  page.entered = showDecision($("decision"), page.decision, page.policy.spaces, $("human").checked);
  status(`return so far ${page.total.toFixed(3)}, value ${page.decision.value.toFixed(3)}`);
}

function humanChoice(probs, name, actor) {
  const picked = document.querySelector(`input[name="${CSS.escape(`${name}/${actor}`)}"]:checked`);
  return picked ? Number(picked.value) : choose(probs, null, true);
}

async function step(actions = null) {
  requireEnv();
  if (page.obs.done) return;
  const human = $("human").checked;
  const deterministic = human || $("deterministic").checked;
  const chosen = actions ?? toActions(page.decision, page.policy.spaces, ...chooser(human, deterministic));
  page.obs = page.env.act(chosen);
  page.total += page.obs.reward;
  await refresh();
}

// How to pick each actor's choice and continuous values: the person's (read, and validated,
// before anything is taken: a wrong value steps nothing), or the policy's.
function chooser(human, deterministic) {
  if (human) {
    const entered = page.entered();
    return [humanChoice, (mean, std, name, actor) => entered[name][actor]];
  }
  const pick = (probs) => choose(probs, page.rng, deterministic);
  const draw = (mean, std) => gaussianValues(mean, std, page.rng, deterministic);
  return [pick, draw];
}

function stopRunning() {
  clearInterval(page.timer);
  page.timer = null;
  $("run").textContent = "Play";
}

$("model-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) await guarded(`cannot load ${file.name}`, async () => usePolicy(await file.arrayBuffer(), file.name))();
});
$("env-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  // A module of the page's own origin (blob:), so it runs as ?env= modules do; it cannot
  // import files beside it, so it must hold its environments whole.
  const url = URL.createObjectURL(file);
  await guarded(`cannot load ${file.name}`, () => addEnvironments(url, file.name))();
  URL.revokeObjectURL(url);
});
$("reset").addEventListener("click", guarded("cannot reset", reset));
$("step").addEventListener("click", guarded("cannot step", () => step()));
$("human").addEventListener("change", guarded("cannot show the decision", () => page.decision && show()));
$("run").addEventListener(
  "click",
  guarded("cannot play", () => {
    if (page.timer) return stopRunning();
    requireEnv();
    $("run").textContent = "Pause";
    page.timer = setInterval(
      guarded("stopped playing", async () => {
        if (page.obs.done) await reset();
        else await step();
      }),
      400,
    );
  }),
);
$("board").addEventListener(
  "click",
  guarded("cannot take that action", async (event) => {
    if (!$("human").checked || !page.env?.actionAt) return;
    const box = event.target.getBoundingClientRect();
    const actions = page.env.actionAt(event.clientX - box.left, event.clientY - box.top, box.width);
    if (actions) await step(actions);
  }),
);
$("evaluate").addEventListener(
  "click",
  guarded("cannot evaluate", async () => {
    requireEnv();
    const episodes = Number($("episodes").value);
    status(`playing ${episodes} episodes...`);
    const returns = await playEpisodes(page.policy, { episodes, seed: 0, deterministic: $("deterministic").checked });
    const mean = returns.reduce((a, b) => a + b, 0) / returns.length;
    $("mean-return").textContent = `${mean.toFixed(4)} over ${episodes} episodes`;
    document.body.dataset.meanReturn = String(mean);
    status("evaluation done");
  }),
);

const replay = new Replay({
  canvas: $("replay-board"),
  legend: $("replay-legend"),
  images: $("replay-images"),
  details: $("replay-details"),
  slider: $("replay-step"),
  where: $("replay-where"),
  play: $("replay-play"),
});
// The replay's errors go to its own line.
function replayGuarded(what, handler) {
  return async (...args) => {
    try {
      $("replay-where").classList.remove("error");
      await handler(...args);
    } catch (err) {
      replay.pause();
      $("replay-where").textContent = `${what}: ${err.message}`;
      $("replay-where").classList.add("error");
    }
  };
}
$("replay-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) await replayGuarded(`cannot replay ${file.name}`, async () => replay.load(await file.text()))();
});
$("replay-prev").addEventListener("click", replayGuarded("cannot show the step", () => replay.show(replay.index - 1)));
$("replay-next").addEventListener("click", replayGuarded("cannot show the step", () => replay.show(replay.index + 1)));
$("replay-play").addEventListener("click", () => (replay.timer ? replay.pause() : replay.play()));
$("replay-step").addEventListener(
  "input",
  replayGuarded("cannot show the step", (event) => replay.show(Number(event.target.value))),
);

window.entityrl = {
  Policy,
  Random,
  replay,
  usePolicy,
  registerEnvironment,
  addEnvironments,
  playEpisodes: (options) => playEpisodes(page.policy, options),
  runRules: (env, state, actionsList) => runRules(env, state, actionsList),
  decide: (obs, options) => page.policy.decide(obs, options),
  act: (obs, options) => page.policy.act(obs, options),
  timeDecisions: (obs, calls) => timeDecisions(page.policy, obs, calls),
};

// ?env=URL: a module of the user's environments (docs/deploy.md), registered before the
// policy (?model=URL) is loaded.
async function start() {
  const query = new URLSearchParams(location.search);
  const env = query.get("env");
  const model = query.get("model");
  if (env) await guarded(`cannot load the environments of ${env}`, () => addEnvironments(env, env))();
  if (model) await guarded(`cannot load ${model}`, () => usePolicy(model, model))();
  document.body.dataset.ready = "true";
}
start();
