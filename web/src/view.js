// The agent's decision as tables: per action and actor, each choice's probability (and, when
// a human plays, a radio button to pick it), or a continuous action's mean and standard
// deviation per component. Names and labels come from the model: set as text, never as HTML.

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

function showGaussian(table, space, { actors, mean, std }) {
  mean.forEach((row, a) => {
    row.forEach((m, d) => {
      const tr = table.insertRow();
      cell(tr, d === 0 ? actorName(actors[a]) : "");
      cell(tr, space.dims[d]);
      cell(tr, `${m.toFixed(4)} ± ${std[d].toFixed(4)}`);
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

export function showDecision(element, decision, spaces, human) {
  element.replaceChildren();
  for (const [name, space] of Object.entries(spaces.actions)) {
    if (!decision.actions[name].actors.length) continue;
    const table = captioned(name);
    if (isGaussian(space)) showGaussian(table, space, decision.actions[name]);
    else showChoices(table, space, decision, name, human);
    element.append(table);
  }
}
