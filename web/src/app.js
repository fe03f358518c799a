// The page: load an exported policy, let it (or a human) play the environment it was trained
// on, show its action probabilities; replay recorded episodes. `window.entityrl` exposes the
// same pieces to scripts and tests.

import { makeEnvironment, playEpisodes, runRules, timeDecisions } from "./play.js";
import { Policy, choose, toActions } from "./policy.js";
import { Random } from "./random.js";
import { Replay } from "./replay.js";
import { showDecision } from "./view.js";

const $ = (id) => document.getElementById(id);
const page = { policy: null, env: null, obs: null, decision: null, total: 0, timer: null, rng: new Random(1) };

function status(text) {
  $("status").textContent = text;
}

async function usePolicy(source, label) {
  page.policy = await Policy.load(source);
  const { id, kwargs } = page.policy.env;
  $("model-info").textContent = `${label}: ${id} ${JSON.stringify(kwargs ?? {})}, entityrl ${page.policy.version}`;
  try {
    page.env = makeEnvironment(page.policy.env, page.rng);
    await reset();
  } catch (err) {
    page.env = null;
    status(err.message);
  }
  document.body.dataset.ready = "true";
  return page.policy;
}

async function reset() {
  page.obs = page.env.reset();
  page.total = 0;
  page.policy.reset();
  await refresh();
}

// Decide for the current observation: with memory, one step of the episode, so only when the
// observation is new (see show()).
async function refresh() {
  page.decision = await page.policy.decide(page.obs);
  show();
}

function show() {
  const ctx = $("board").getContext("2d");
  ctx.clearRect(0, 0, ctx.canvas.width, ctx.canvas.height);
  page.env.draw(ctx, page.decision);
  showDecision($("decision"), page.decision, page.policy.spaces, $("human").checked);
  status(`return so far ${page.total.toFixed(3)}, value ${page.decision.value.toFixed(3)}${page.obs.done ? " (episode over: Reset)" : ""}`);
}

function humanChoice(probs, name, actor) {
  const picked = document.querySelector(`input[name="${CSS.escape(`${name}/${actor}`)}"]:checked`);
  return picked ? Number(picked.value) : choose(probs, null, true);
}

async function step(actions = null) {
  if (!page.env || page.obs.done) return;
  const human = $("human").checked;
  const pick = human
    ? humanChoice
    : (probs) => choose(probs, page.rng, $("deterministic").checked);
  page.obs = page.env.act(actions ?? toActions(page.decision, page.policy.spaces, pick));
  page.total += page.obs.reward;
  await refresh();
}

$("model-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  try {
    await usePolicy(await file.arrayBuffer(), file.name);
  } catch (err) {
    status(`cannot load ${file.name}: ${err.message}`);
  }
});
$("reset").addEventListener("click", reset);
$("step").addEventListener("click", () => step());
$("human").addEventListener("change", () => page.env && show());
$("run").addEventListener("click", () => {
  if (page.timer) {
    clearInterval(page.timer);
    page.timer = null;
    $("run").textContent = "Play";
    return;
  }
  $("run").textContent = "Pause";
  page.timer = setInterval(async () => {
    if (page.obs.done) await reset();
    else await step();
  }, 400);
});
$("board").addEventListener("click", async (event) => {
  if (!$("human").checked || !page.env) return;
  const box = event.target.getBoundingClientRect();
  const actions = page.env.actionAt(event.clientX - box.left, event.clientY - box.top, box.width);
  if (actions) await step(actions);
});
$("evaluate").addEventListener("click", async () => {
  const episodes = Number($("episodes").value);
  status(`playing ${episodes} episodes...`);
  const returns = await playEpisodes(page.policy, { episodes, seed: 0, deterministic: $("deterministic").checked });
  const mean = returns.reduce((a, b) => a + b, 0) / returns.length;
  $("mean-return").textContent = `${mean.toFixed(4)} over ${episodes} episodes`;
  document.body.dataset.meanReturn = String(mean);
  status("evaluation done");
});

const replay = new Replay($("replay-board"), $("replay-details"), $("replay-step"), $("replay-where"));
$("replay-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) replay.load(await file.text());
});
$("replay-prev").addEventListener("click", () => replay.show(replay.index - 1));
$("replay-next").addEventListener("click", () => replay.show(replay.index + 1));
$("replay-step").addEventListener("input", (event) => replay.show(Number(event.target.value)));

window.entityrl = {
  Policy,
  Random,
  replay,
  usePolicy,
  playEpisodes: (options) => playEpisodes(page.policy, options),
  runRules: (env, state, actionsList) => runRules(env, state, actionsList),
  decide: (obs, options) => page.policy.decide(obs, options),
  timeDecisions: (obs, calls) => timeDecisions(page.policy, obs, calls),
};

const model = new URLSearchParams(location.search).get("model");
if (model) usePolicy(model, model).catch((err) => status(`cannot load ${model}: ${err.message}`));
else document.body.dataset.ready = "true";
