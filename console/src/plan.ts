// The plan drawn as a DAG: steps layered by their dependencies, as SVG.

export interface TaskRef {
  task_id: string;
  state?: string | null;
  sub_state?: string | null;
  agent?: { id?: string } | null;
}

export interface Step {
  id: string;
  name: string;
  description?: string;
  depends_on?: string[];
  state?: string;
  output?: string | null;
  linked_tasks?: TaskRef[];
}

export interface Placed {
  step: Step;
  layer: number;
  row: number;
}

/** Each step's layer: 0 without dependencies, else one past its deepest dependency. */
export function layers(steps: Step[]): Placed[] {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map<string, number>();
  const visiting = new Set<string>();
  const layerOf = (step: Step): number => {
    const known = depth.get(step.id);
    if (known !== undefined) return known;
    if (visiting.has(step.id)) return 0; // a cycle: the service refuses them, stay safe
    visiting.add(step.id);
    let layer = 0;
    for (const dep of step.depends_on ?? []) {
      const parent = byId.get(dep);
      if (parent) layer = Math.max(layer, layerOf(parent) + 1);
    }
    visiting.delete(step.id);
    depth.set(step.id, layer);
    return layer;
  };
  const rows: number[] = [];
  return steps.map((step) => {
    const layer = layerOf(step);
    const row = rows[layer] ?? 0;
    rows[layer] = row + 1;
    return { step, layer, row };
  });
}

const NODE_W = 180;
const NODE_H = 54;
const GAP_X = 48;
const GAP_Y = 30;
/** Room above the first row for the edges that skip a layer. */
const PAD_TOP = 24;
const SVG_NS = "http://www.w3.org/2000/svg";

function el(name: string, attrs: Record<string, string | number>): SVGElement {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The plan as an SVG element; clicking a step calls `select` with it. */
export function planSvg(steps: Step[], select: (step: Step) => void): SVGSVGElement {
  const placed = layers(steps);
  const where = new Map(placed.map((p) => [p.step.id, p]));
  const width = Math.max(1, ...placed.map((p) => p.layer + 1)) * (NODE_W + GAP_X);
  const height = PAD_TOP + Math.max(1, ...placed.map((p) => p.row + 1)) * (NODE_H + GAP_Y);
  const svg = el("svg", {
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    role: "img",
    class: "plan",
  }) as SVGSVGElement;
  const title = el("title", {});
  title.textContent = `Plan of ${steps.length} steps`;
  svg.appendChild(title);
  const x = (p: Placed) => p.layer * (NODE_W + GAP_X);
  const y = (p: Placed) => PAD_TOP + p.row * (NODE_H + GAP_Y);
  const edges = el("g", { class: "edges" });
  for (const p of placed) {
    for (const dep of p.step.depends_on ?? []) {
      const from = where.get(dep);
      if (!from) continue;
      if (p.layer - from.layer > 1) {
        // Skipping a layer: over the steps in between, from the top of one to the top of the other.
        const x1 = x(from) + NODE_W - 20;
        const x2 = x(p) + 20;
        const y1 = y(from);
        const y2 = y(p);
        const lift = Math.min(y1, y2) - 22;
        edges.appendChild(el("path", { d: `M${x1},${y1} C${x1},${lift} ${x2},${lift} ${x2},${y2}` }));
        continue;
      }
      const x1 = x(from) + NODE_W;
      const y1 = y(from) + NODE_H / 2;
      const x2 = x(p);
      const y2 = y(p) + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      edges.appendChild(el("path", { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}` }));
    }
  }
  svg.appendChild(edges);
  for (const p of placed) {
    const state = p.step.state ?? "pending";
    const g = el("g", {
      class: `step step-${state}`,
      transform: `translate(${x(p)},${y(p)})`,
      tabindex: 0,
      role: "button",
      "data-step": p.step.id,
      "data-state": state,
    });
    const label = `${p.step.name}: ${state}${p.step.output ? ` — ${p.step.output}` : ""}`;
    g.setAttribute("aria-label", label);
    g.appendChild(el("rect", { width: NODE_W, height: NODE_H, rx: 6 }));
    const name = el("text", { x: 8, y: 20, class: "name" });
    name.textContent = clip(p.step.name, 24);
    const sub = el("text", { x: 8, y: 40, class: "sub" });
    const links = (p.step.linked_tasks ?? []).length;
    sub.textContent = `${state}${links ? ` · ${links} sub-task${links > 1 ? "s" : ""}` : ""}`;
    g.append(name, sub);
    const tip = el("title", {});
    tip.textContent = label;
    g.appendChild(tip);
    g.addEventListener("click", () => select(p.step));
    g.addEventListener("keydown", (e) => {
      const key = (e as KeyboardEvent).key;
      if (key === "Enter" || key === " ") {
        e.preventDefault();
        select(p.step);
      }
    });
    svg.appendChild(g);
  }
  return svg;
}
