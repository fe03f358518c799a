// The environments whose rules the page knows, by their entityrl names.
import { CherryPick } from "./cherry_pick.js";
import { MineSweeper } from "./minesweeper.js";

export const ENVIRONMENTS = { CherryPick, MineSweeper };
