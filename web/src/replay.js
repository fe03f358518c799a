// The replay viewer: recorded episodes (entityrl-episodes/1 JSON lines, written by
// `entityrl eval --replay`; format in entityrl/export/replay.py), step by step or played on,
// for any environment: the generic entity view (entity_view.js) draws and lists the
// entities, a canvas per image of the step shows it (images.js), and a table gives the
// actions taken.

import { EntityView, cell, tableWith } from "./entity_view.js";
import { showImages } from "./images.js";
import { isGaussian, isGlobal } from "./inputs.js";

const FORMAT = "entityrl-episodes/1";
const AUTOPLAY_MS = 300;

// The header and steps of a recording; errors name the line that is not what it should be.
export function parseEpisodes(text) {
  const lines = text.split("\n").filter((line) => line.trim());
  if (!lines.length) throw new Error("the file is empty");
  const parsed = lines.map((line, i) => {
    try {
      return JSON.parse(line);
    } catch (err) {
      throw new Error(`line ${i + 1} is not JSON (${err.message})`);
    }
  });
  const [header, ...steps] = parsed;
  if (header?.format !== FORMAT) {
    const found = header?.format == null ? "no format on its first line" : `format ${JSON.stringify(header.format)}`;
    throw new Error(`not a recording of entityrl episodes: ${found}, expected ${FORMAT} (write one with \`entityrl eval RUN --replay FILE.jsonl\`)`);
  }
  if (!header.spaces?.entities || !header.spaces?.actions) {
    throw new Error("the header has no spaces (entities and actions)");
  }
  steps.forEach((step, i) => {
    if (!step.observation?.features) throw new Error(`line ${i + 2}: a step without observation.features`);
    const unknown = Object.keys(step.actions ?? {}).filter((name) => !(name in header.spaces.actions));
    if (unknown.length) {
      throw new Error(`line ${i + 2}: actions ${unknown.join(", ")} are not in the header's spaces (${Object.keys(header.spaces.actions).join(", ")})`);
    }
  });
  return { header, steps };
}

export class Replay {
  constructor({ canvas, legend, images, details, slider, where, play }) {
    Object.assign(this, { canvas, legend, images, details, slider, where, playButton: play });
    Object.assign(this, { steps: [], index: 0, header: null, view: null, timer: null });
  }

  load(text) {
    const { header, steps } = parseEpisodes(text);
    this.pause();
    this.header = header;
    this.steps = steps;
    // Entities are known by their number in the observation: recordings keep no ids.
    this.view = new EntityView(this.canvas, this.legend, header.spaces, (type, i, number) => `#${number}`);
    for (const step of steps) this.view.fit(step.observation);
    this.slider.max = String(Math.max(steps.length - 1, 0));
    this.show(0);
    return steps.length;
  }

  show(index) {
    if (!this.steps.length) return;
    this.index = Math.min(Math.max(index, 0), this.steps.length - 1);
    this.slider.value = String(this.index);
    const step = this.steps[this.index];
    this.where.textContent = `${this.header.env?.id ?? "unknown environment"}: episode ${step.episode}, step ${step.step}: reward ${Number(step.reward).toFixed(3)}, return ${Number(step.return).toFixed(3)}`;
    this.view.draw(step.observation);
    showImages(this.images, this.header.spaces, step.observation);
    this.describe(step);
  }

  // Steps on every AUTOPLAY_MS until the last step (or pause()).
  play() {
    if (!this.steps.length || this.timer) return;
    if (this.index === this.steps.length - 1) this.show(0);
    this.playButton.textContent = "Pause";
    this.timer = setInterval(() => {
      if (this.index >= this.steps.length - 1) this.pause();
      else this.show(this.index + 1);
    }, AUTOPLAY_MS);
  }

  pause() {
    clearInterval(this.timer);
    this.timer = null;
    this.playButton.textContent = "Play";
  }

  // Every entity's features, then each action's actors and what they chose.
  describe(step) {
    const table = tableWith(["#", "type / action", "features / choice"]);
    this.view.listEntities(table, step.observation);
    const { actions } = this.header.spaces;
    for (const [name, chosen] of Object.entries(step.actions ?? {})) {
      const space = actions[name];
      const offered = step.observation.actions?.[name] ?? {};
      chosen.forEach((c, a) => {
        const who = isGlobal(space) ? "the observation" : `#${offered.actors?.[a]}`;
        let what;
        if (isGaussian(space)) what = [c].flat().map((v) => Number(v).toFixed(3)).join(", ");
        else if (space.choices?.length) what = space.choices[c];
        else what = `#${offered.actees?.[c]}`;
        const tr = table.insertRow();
        cell(tr, "");
        cell(tr, name);
        cell(tr, `${who} → ${what}`);
      });
    }
    this.details.replaceChildren(table);
  }
}
