// The SQL editor: a transparent textarea over a <pre> that shows the same text highlighted.
// The textarea keeps native editing (undo, selection, IME); the <pre> only paints.

const KEYWORDS = new Set(
  `select from where group by order having limit offset as and or not in is null like ilike
  between case when then else end distinct all union intersect except join inner left right
  full outer cross on using with recursive asc desc nulls first last date timestamp interval
  true false cast create view table drop insert into values set explain analyze over partition
  rows range preceding following current row filter exists any some describe show copy to`
    .split(/\s+/)
    .filter(Boolean),
);

// One alternative per token kind; anything else is plain text.
const TOKEN = new RegExp(
  [
    /(--[^\n]*|\/\*[\s\S]*?(?:\*\/|$))/, // comment (an unclosed one runs to the end)
    /('(?:[^']|'')*'?)/, // string
    /("(?:[^"]|"")*"?)/, // quoted identifier
    /(\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b)/, // number
    /([A-Za-z_][A-Za-z0-9_]*)/, // word
  ]
    .map((part) => part.source)
    .join("|"),
  "gi",
);

export function highlightSql(sql: string): string {
  let html = "";
  let last = 0;
  for (const match of sql.matchAll(TOKEN)) {
    html += escapeHtml(sql.slice(last, match.index));
    last = match.index + match[0].length;
    const kind = tokenKind(match);
    html += kind ? `<span class="tok-${kind}">${escapeHtml(match[0])}</span>` : escapeHtml(match[0]);
  }
  return html + escapeHtml(sql.slice(last));
}

function tokenKind([, comment, string, quoted, number, word]: RegExpMatchArray): string | null {
  if (comment) return "comment";
  if (string) return "string";
  if (quoted) return "ident";
  if (number) return "number";
  if (word && KEYWORDS.has(word.toLowerCase())) return "keyword";
  return null;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
}

export class SqlEditor {
  constructor(
    private readonly textarea: HTMLTextAreaElement,
    private readonly painted: HTMLElement,
    onRun: () => void,
  ) {
    textarea.addEventListener("input", () => this.paint());
    textarea.addEventListener("scroll", () => {
      painted.scrollTop = textarea.scrollTop;
      painted.scrollLeft = textarea.scrollLeft;
    });
    textarea.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        onRun();
      }
    });
    this.paint();
  }

  get value(): string {
    return this.textarea.value;
  }

  set value(sql: string) {
    this.textarea.value = sql;
    this.textarea.scrollTop = 0;
    this.paint();
  }

  focus(): void {
    this.textarea.focus();
  }

  private paint(): void {
    // The trailing newline gives the <pre> the textarea's empty last line, so both scroll alike.
    this.painted.innerHTML = highlightSql(this.textarea.value) + "\n";
    this.painted.scrollTop = this.textarea.scrollTop;
  }
}
