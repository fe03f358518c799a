// The replay viewer: recorded episodes (entityrl-episodes/1 JSON lines, written by
// `entityrl eval --replay`; format in entityrl/export/replay.py), step by step, for any
// environment: entities with position features drawn on the board, every entity's features and
// the actions taken in a table.

const FORMAT = "entityrl-episodes/1";
const COLORS = ["#c22", "#246", "#393", "#d80", "#839", "#0aa", "#777"];
const X_NAMES = ["x", "x_pos", "pos_x"];
const Y_NAMES = ["y", "y_pos", "pos_y"];

function positionColumn(features, names) {
  return features.findIndex((f) => names.includes(f));
}

export function parseEpisodes(text) {
  const lines = text.split("\n").filter((line) => line.trim());
  if (!lines.length) throw new Error("the file is empty");
  const header = JSON.parse(lines[0]);
  if (header.format !== FORMAT) {
    throw new Error(`not a recording of entityrl episodes (format ${header.format}, expected ${FORMAT})`);
  }
  return { header, steps: lines.slice(1).map((line) => JSON.parse(line)) };
}

export class Replay {
  constructor(canvas, details, slider, where) {
    Object.assign(this, { canvas, details, slider, where, steps: [], index: 0, header: null });
  }

  load(text) {
    const { header, steps } = parseEpisodes(text);
    this.header = header;
    this.steps = steps;
    this.slider.max = String(Math.max(steps.length - 1, 0));
    this.show(0);
    return steps.length;
  }

  show(index) {
    if (!this.steps.length) return;
    this.index = Math.min(Math.max(index, 0), this.steps.length - 1);
    this.slider.value = String(this.index);
    const step = this.steps[this.index];
    this.where.textContent = `${this.header.env.id}: episode ${step.episode}, step ${step.step}: reward ${step.reward.toFixed(3)}, return ${step.return.toFixed(3)}`;
    this.draw(step.observation);
    this.describe(step);
  }

  // Entities with position features (x and y, x_pos and y_pos), each type in its colour, on a
  // board fitted to them all.
  draw(obs) {
    const ctx = this.canvas.getContext("2d");
    const { width, height } = this.canvas;
    ctx.clearRect(0, 0, width, height);
    const placed = [];
    Object.entries(this.header.spaces.entities).forEach(([type, features], t) => {
      const x = positionColumn(features, X_NAMES);
      const y = positionColumn(features, Y_NAMES);
      if (x < 0 || y < 0) return;
      for (const row of obs.features[type] ?? []) placed.push([row[x], row[y], COLORS[t % COLORS.length]]);
    });
    if (!placed.length) return;
    const xs = placed.map((p) => p[0]);
    const ys = placed.map((p) => p[1]);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const scale = Math.min((width - 40) / Math.max(x1 - x0, 1), (height - 40) / Math.max(y1 - y0, 1));
    for (const [x, y, color] of placed) {
      ctx.fillStyle = color;
      ctx.beginPath();
      ctx.arc(20 + (x - x0) * scale, height - 20 - (y - y0) * scale, 8, 0, 2 * Math.PI);
      ctx.fill();
    }
  }

  // Every entity's features, then each action's actors and what they chose.
  describe(step) {
    const { spaces } = this.header;
    const rows = [];
    let index = 0;
    Object.entries(spaces.entities).forEach(([type, features], t) => {
      for (const row of step.observation.features[type] ?? []) {
        const shown = features.map((f, i) => `${f}=${Number(row[i]).toFixed(3)}`).join(" ");
        rows.push(`<tr><td>${index++}</td><td style="color:${COLORS[t % COLORS.length]}">${type}</td><td>${shown}</td></tr>`);
      }
    });
    for (const [name, chosen] of Object.entries(step.actions ?? {})) {
      const space = spaces.actions[name];
      const actors = step.observation.actions[name]?.actors ?? [];
      const actees = step.observation.actions[name]?.actees ?? [];
      chosen.forEach((c, a) => {
        const what = space.choices.length ? space.choices[c] : `entity ${actees[c]}`;
        const who = space.kind === "GlobalCategoricalActionSpace" ? "the observation" : `entity ${actors[a]}`;
        rows.push(`<tr><td></td><td>${name}</td><td>${who} → ${what}</td></tr>`);
      });
    }
    this.details.innerHTML = `<table><tr><th>#</th><th>type / action</th><th>features / choice</th></tr>${rows.join("")}</table>`;
  }
}
