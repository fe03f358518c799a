// Episodes of an environment played by a policy, without the page: the page's "Evaluate"
// button and the browser tests use these.

import { ENVIRONMENTS } from "./envs/index.js";
import { Random } from "./random.js";

export function makeEnvironment(env, rng) {
  const Env = ENVIRONMENTS[env.id];
  if (!Env) {
    throw new Error(
      `no rules for ${env.id} in this page (it has ${Object.keys(ENVIRONMENTS).join(", ")}): add yours with ?env=URL (docs/deploy.md), or replay recorded episodes`,
    );
  }
  return new Env(env.kwargs ?? {}, rng);
}

// Runs `run` with `policy`, then gives the policy back the episode it carried (memory,
// stacking): the page's own episode goes on as it was.
async function keepingState(policy, run) {
  const saved = policy.episode;
  try {
    return await run();
  } finally {
    policy.episode = saved;
  }
}

// Play `episodes` complete episodes; each starts from initialStates[i] when given, else from a
// reset drawn with `seed`. Returns each episode's return.
export function playEpisodes(policy, options) {
  return keepingState(policy, () => play(policy, options));
}

async function play(policy, { episodes, seed = 0, deterministic = false, initialStates = null, maxSteps = 100000 }) {
  const rng = new Random(seed);
  const env = makeEnvironment(policy.env, rng);
  const returns = [];
  for (let e = 0; e < episodes; e++) {
    let obs = initialStates ? env.setState(initialStates[e]) : env.reset();
    let total = 0;
    for (let step = 0; !obs.done; step++) {
      if (step >= maxSteps) throw new Error(`episode ${e} has not ended after ${maxSteps} steps`);
      const { actions } = await policy.act(obs, { rng, deterministic, newEpisode: step === 0 });
      obs = env.act(actions);
      total += obs.reward;
    }
    returns.push(total);
  }
  return returns;
}

// The observations the page's rules give for `actionsList`, from `state`.
export function runRules(env, state, actionsList) {
  const game = makeEnvironment(env, new Random(0));
  const observations = [game.setState(state)];
  for (const actions of actionsList) observations.push(game.act(actions));
  return observations;
}

// Milliseconds per decision of `policy` on `obs`: each of `calls` timed after a warm-up.
export function timeDecisions(policy, obs, calls) {
  return keepingState(policy, async () => {
    for (let i = 0; i < Math.max(10, calls / 10); i++) await policy.decide(obs);
    const times = [];
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      await policy.decide(obs);
      times.push(performance.now() - start);
    }
    return times;
  });
}
