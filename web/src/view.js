// The agent's decision as tables: per action and actor, each choice's probability (and, when
// a human plays, a radio button to pick it), or a continuous action's mean and standard
// deviation per component (and, when a human plays, a field and a slider to enter its value).
// Names and labels come from the model: set as text, never as HTML.

import { cell } from "./entity_view.js";
import { isGaussian } from "./inputs.js";

function label(space, decision, name, column) {
  if (space.choices.length) return space.choices[column];
  return JSON.stringify(decision.actions[name].actees[column]);
}

function actorName(actor) {
  return JSON.stringify(actor ?? "global");
}

function captioned(name) {
  const table = document.createElement("table");
  table.createCaption().textContent = name;
  return table;
}

// Per actor and component, the mean and standard deviation; when a human plays, a field for
// the value (prefilled with the mean, clipped to the bounds) and, within finite bounds, a
// slider. Each field goes into `fields`, which enteredValues() reads.
function showGaussian(table, space, name, { actors, mean, std }, human, fields) {
  mean.forEach((row, a) => {
    row.forEach((m, d) => {
      const tr = table.insertRow();
      cell(tr, d === 0 ? actorName(actors[a]) : "");
      cell(tr, space.dims[d]);
      cell(tr, `${m.toFixed(4)} ± ${std[d].toFixed(4)}`);
      if (human) {
        const field = { ...valueField(space, d, m), name, actor: actors[a], a, d, dim: space.dims[d] };
        // Where the page's tests (and scripts) find the field.
        Object.assign(field.text.dataset, { action: name, actor: String(a), component: field.dim });
        const entry = tr.insertCell();
        entry.className = "entry";
        entry.append(...field.elements);
        fields.push(field);
      }
    });
  });
}

function showChoices(table, space, decision, name, human) {
  const { actors, probs } = decision.actions[name];
  probs.forEach((row, a) => {
    const best = row.indexOf(Math.max(...row));
    row.forEach((p, column) => {
      const tr = table.insertRow();
      if (column === best) tr.className = "chosen";
      cell(tr, column === 0 ? actorName(actors[a]) : "");
      cell(tr, label(space, decision, name, column));
      const bar = document.createElement("span");
      bar.className = "bar";
      bar.style.width = `${Math.round(80 * p)}px`;
      cell(tr, ` ${(100 * p).toFixed(1)}%`).prepend(bar);
      if (human) {
        const radio = document.createElement("input");
        Object.assign(radio, { type: "radio", name: `${name}/${a}`, value: column, checked: column === best });
        radio.disabled = p === 0;
        tr.insertCell().append(radio);
      }
    });
  });
}

// A component's bounds ([-Infinity, Infinity] where the metadata gives none).
function bounds(space, d) {
  return [space.low?.[d] ?? -Infinity, space.high?.[d] ?? Infinity];
}

// The shortest decimal that reads back as the same float32 (the model's precision) and stays
// within the bounds: the prefilled text is exactly what the environment receives, and easy
// to read (0.0123, not 0.012299999594688416).
function valueText(value, low, high) {
  for (let digits = 1; digits < 17; digits++) {
    const text = String(Number(value.toPrecision(digits)));
    const back = Number(text);
    if (Math.fround(back) === Math.fround(value) && back >= low && back <= high) return text;
  }
  return String(value);
}

// A text field rather than <input type=number>: a number input hides what was typed when it
// is no number (its value is then ""), and the error must show it.
function valueField(space, d, mean) {
  const [low, high] = bounds(space, d);
  const prefilled = valueText(Math.min(Math.max(mean, low), high), low, high);
  const text = document.createElement("input");
  Object.assign(text, { type: "text", inputMode: "decimal", size: 10, value: prefilled, className: "value" });
  text.setAttribute("aria-label", `${space.dims[d]} in [${low}, ${high}]`);
  const field = { text, low, high, elements: [text] };
  if (Number.isFinite(low) && Number.isFinite(high)) {
    const slider = document.createElement("input");
    Object.assign(slider, { type: "range", min: low, max: high, step: "any", value: prefilled });
    slider.setAttribute("aria-label", `${space.dims[d]} slider`);
    slider.addEventListener("input", () => {
      text.value = slider.value;
      markInvalid(text, false);
    });
    // The slider follows the field while the field holds a value it can show.
    text.addEventListener("input", () => {
      markInvalid(text, false);
      const value = parsedValue(text.value, low, high);
      if (value !== null) slider.value = String(value);
    });
    field.elements.push(slider);
  }
  return field;
}

function markInvalid(text, invalid) {
  text.classList.toggle("invalid", invalid);
  if (invalid) text.setAttribute("aria-invalid", "true");
  else text.removeAttribute("aria-invalid");
}

// A decimal number (sign, digits, point, exponent), nothing else: not "", "0x10" or "Infinity",
// which Number() would read.
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

// `typed` as a number within [low, high], or null.
function parsedValue(typed, low, high) {
  const trimmed = typed.trim();
  if (!DECIMAL.test(trimmed)) return null;
  const value = Number(trimmed);
  return Number.isFinite(value) && value >= low && value <= high ? value : null;
}

// What a person entered in `fields`: per continuous action, one row of values per actor.
// Every field without a number within its bounds is marked, and the first throws, naming the
// action, the actor, the component, the bounds and what was typed (nothing is taken then).
function enteredValues(fields) {
  const values = {};
  let error = null;
  for (const { text, low, high, name, actor, a, d, dim } of fields) {
    const value = parsedValue(text.value, low, high);
    markInvalid(text, value === null);
    if (value !== null) {
      ((values[name] ??= [])[a] ??= [])[d] = value;
    } else if (error === null) {
      const who = actor == null ? "the global action" : `actor ${actorName(actor)}`;
      const typed = JSON.stringify(text.value);
      error = `${name}: ${who}, component ${JSON.stringify(dim)}: expected a number in [${low}, ${high}], got ${typed}`;
    }
  }
  if (error !== null) throw new Error(error);
  return values;
}

// Shows `decision` in `element`; returns a function that reads the continuous values a
// person entered (see enteredValues; with `human` false, there are none).
export function showDecision(element, decision, spaces, human) {
  element.replaceChildren();
  const fields = [];
  for (const [name, space] of Object.entries(spaces.actions)) {
    if (!decision.actions[name].actors.length) continue;
    const table = captioned(name);
    if (isGaussian(space)) showGaussian(table, space, name, decision.actions[name], human, fields);
    else showChoices(table, space, decision, name, human);
    element.append(table);
  }
  return () => enteredValues(fields);
}
