// A view of any environment's observations from its spaces alone, for environments the page
// has no drawing of: entities with position-like features placed on a canvas (each type in
// its colour, each entity labelled with its id), a legend per entity type, and every entity's
// features in a table. Names come from models and recordings: they reach the page as text
// (textContent, canvas text), never as HTML.

const COLORS = ["#c22", "#246", "#393", "#d80", "#839", "#0aa", "#777"];
// Feature pairs read as a position, [horizontal, vertical]; grid rows count downwards.
const POSITIONS = [
  { x: "x", y: "y", down: false },
  { x: "x_pos", y: "y_pos", down: false },
  { x: "pos_x", y: "pos_y", down: false },
  { x: "col", y: "row", down: true },
  { x: "column", y: "row", down: true },
];
const MARGIN = 24;
const RADIUS = 8;
// A position among the global features (a player's, say) is drawn as a square of this colour.
const GLOBAL_COLOR = "#000";

// The columns of the first position pair among `features`, or null.
export function positionOf(features) {
  for (const { x, y, down } of POSITIONS) {
    const [i, j] = [features.indexOf(x), features.indexOf(y)];
    if (i >= 0 && j >= 0) return { x: i, y: j, down };
  }
  return null;
}

export function cell(row, text, color = null) {
  const td = row.insertCell();
  td.textContent = text;
  if (color) td.style.color = color;
  return td;
}

export class EntityView {
  // `label(type, i, number)`: the text shown for entity i of its type (number: its place in
  // the observation, type after type).
  constructor(canvas, legend, spaces, label) {
    Object.assign(this, { canvas, legend, spaces, label });
    this.types = Object.entries(spaces.entities).map(([type, features], t) => ({
      type,
      features,
      color: COLORS[t % COLORS.length],
      position: positionOf(features),
    }));
    this.globalPosition = positionOf(spaces.global_features);
    this.bounds = null;
    this.showLegend();
  }

  showLegend() {
    this.legend.replaceChildren();
    const item = (color, square, text) => {
      const swatch = document.createElement("span");
      swatch.className = square ? "swatch square" : "swatch";
      swatch.style.background = color;
      const li = document.createElement("li");
      li.append(swatch, text);
      this.legend.append(li);
    };
    const at = (names, { x, y }) => `at (${names[x]}, ${names[y]})`;
    for (const { type, color, position, features } of this.types) {
      item(color, false, `${type} ${position ? at(features, position) : "listed only: no position features"}`);
    }
    if (this.globalPosition) {
      item(GLOBAL_COLOR, true, `global features ${at(this.spaces.global_features, this.globalPosition)}`);
    }
  }

  // Every placed entity of `obs`, and the global position: {x, y, color, text, square}.
  placed(obs) {
    const found = [];
    const globals = obs.global_features ?? [];
    if (this.globalPosition && globals.length) {
      const { x, y, down } = this.globalPosition;
      found.push({ x: globals[x], y: down ? -globals[y] : globals[y], color: GLOBAL_COLOR, text: "global", square: true });
    }
    let number = 0;
    for (const { type, color, position } of this.types) {
      const rows = obs.features?.[type] ?? [];
      rows.forEach((row, i) => {
        if (position) {
          const y = position.down ? -row[position.y] : row[position.y];
          found.push({ x: row[position.x], y, color, text: this.label(type, i, number), square: false });
        }
        number++;
      });
    }
    return found;
  }

  // Widens the board to hold the entities of `obs` (a replay fits all its steps at once, so
  // that the board stays still while entities move).
  fit(obs) {
    for (const { x, y } of this.placed(obs)) {
      const b = (this.bounds ??= { x0: x, x1: x, y0: y, y1: y });
      Object.assign(b, { x0: Math.min(b.x0, x), x1: Math.max(b.x1, x), y0: Math.min(b.y0, y), y1: Math.max(b.y1, y) });
    }
  }

  draw(obs) {
    this.fit(obs);
    const ctx = this.canvas.getContext("2d");
    const { width, height } = this.canvas;
    ctx.clearRect(0, 0, width, height);
    const placed = this.placed(obs);
    if (!placed.length) return;
    const { x0, x1, y0, y1 } = this.bounds;
    const scale = Math.min((width - 2 * MARGIN) / Math.max(x1 - x0, 1e-9), (height - 2 * MARGIN) / Math.max(y1 - y0, 1e-9));
    // Centred, where the entities span less than the board in one direction (or none at all).
    const left = (width - (x1 - x0) * scale) / 2;
    const bottom = (height + (y1 - y0) * scale) / 2;
    ctx.font = "11px sans-serif";
    for (const { x, y, color, text, square } of placed) {
      const [px, py] = [left + (x - x0) * scale, bottom - (y - y0) * scale];
      ctx.fillStyle = color;
      ctx.beginPath();
      if (square) ctx.rect(px - RADIUS, py - RADIUS, 2 * RADIUS, 2 * RADIUS);
      else ctx.arc(px, py, RADIUS, 0, 2 * Math.PI);
      ctx.fill();
      ctx.fillStyle = "#222";
      ctx.fillText(text, px + RADIUS + 2, py - RADIUS);
    }
  }

  // One table row per entity of `obs`: its label, type and features.
  listEntities(table, obs) {
    let number = 0;
    for (const { type, features, color } of this.types) {
      (obs.features?.[type] ?? []).forEach((row, i) => {
        const tr = table.insertRow();
        cell(tr, this.label(type, i, number++));
        cell(tr, type, color);
        cell(tr, features.map((f, k) => `${f}=${Number(row[k]).toFixed(3)}`).join(" "));
      });
    }
  }
}

// A table with a header row of `titles`.
export function tableWith(titles) {
  const table = document.createElement("table");
  const header = table.insertRow();
  for (const title of titles) {
    const th = document.createElement("th");
    th.textContent = title;
    header.append(th);
  }
  return table;
}
