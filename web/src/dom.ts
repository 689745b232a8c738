// Small helpers to build HTML and SVG elements.

const SVG_NS = "http://www.w3.org/2000/svg";

export function element(tag: string, className: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function svgElement(tag: string, attributes: Record<string, string | number>, text?: string): SVGElement {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** A hover tooltip for an SVG shape. */
export function svgTitle(text: string): SVGElement {
  return svgElement("title", {}, text);
}
