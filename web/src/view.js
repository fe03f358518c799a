// The agent's decision as tables: per action and actor, each choice's probability (and, when
// a human plays, a radio button to pick it).

function label(space, decision, name, column) {
  if (space.choices.length) return space.choices[column];
  return JSON.stringify(decision.actions[name].actees[column]);
}

export function showDecision(element, decision, spaces, human) {
  element.replaceChildren();
  for (const [name, space] of Object.entries(spaces.actions)) {
    const { actors, probs } = decision.actions[name];
    if (!actors.length) continue;
    const table = document.createElement("table");
    table.innerHTML = `<caption>${name}</caption>`;
    probs.forEach((row, a) => {
      const best = row.indexOf(Math.max(...row));
      const actor = JSON.stringify(actors[a] ?? "global");
      row.forEach((p, column) => {
        const tr = table.insertRow();
        if (column === best) tr.className = "chosen";
        tr.insertCell().textContent = column === 0 ? actor : "";
        tr.insertCell().textContent = label(space, decision, name, column);
        tr.insertCell().innerHTML = `<span class="bar" style="width:${Math.round(80 * p)}px"></span> ${(100 * p).toFixed(1)}%`;
        if (human) {
          const radio = document.createElement("input");
          Object.assign(radio, { type: "radio", name: `${name}/${a}`, value: column, checked: column === best });
          radio.disabled = p === 0;
          tr.insertCell().append(radio);
        }
      });
    });
    element.append(table);
  }
}
