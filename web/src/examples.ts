// Example queries over the TPC-H layout that scripts/gen_tpch.py writes (single/<table>.parquet
// and many/<table>/*.parquet) under a data base URL: ?data= on the page, or a placeholder.

export const PLACEHOLDER_DATA_URL = "https://YOUR-HOST/tpch";

export interface Example {
  name: string;
  sql: string;
}

export function dataBaseUrl(params: URLSearchParams): string {
  return (params.get("data") || PLACEHOLDER_DATA_URL).replace(/\/+$/, "");
}

/** A path as an SQL string literal. */
export function sqlString(path: string): string {
  return `'${path.replaceAll("'", "''")}'`;
}

export function examples(base: string): Example[] {
  const lineitem = sqlString(`${base}/single/lineitem.parquet`);
  const lineitemFiles = sqlString(`${base}/many/lineitem/*.parquet`);
  return [
    {
      name: "TPC-H Q1",
      sql: `-- TPC-H Q1: pricing summary report
select
    l_returnflag,
    l_linestatus,
    sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty,
    avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc,
    count(*) as count_order
from ${lineitem}
where l_shipdate <= date '1998-12-01' - interval '90 days'
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus;`,
    },
    {
      name: "TPC-H Q6",
      sql: `-- TPC-H Q6: forecasting revenue change
select sum(l_extendedprice * l_discount) as revenue
from ${lineitem}
where l_shipdate >= date '1994-01-01'
    and l_shipdate < date '1994-01-01' + interval '1 year'
    and l_discount between 0.06 - 0.01 and 0.06 + 0.01
    and l_quantity < 24;`,
    },
    {
      name: "Count over a glob",
      sql: `-- Globs: * ? ** {a,b} {1..9}; over HTTP they are expanded from index pages
select count(*) as row_count from ${lineitemFiles};`,
    },
    {
      name: "Listing only",
      sql: `-- Only the listing: no Parquet file is opened
select distinct _file from ${lineitemFiles} order by _file;`,
    },
    {
      name: "S3",
      sql: `-- Set the endpoint, region and keys (or anonymous) under S3 settings first
select count(*) from 's3://bucket/path/*.parquet';`,
    },
  ];
}

/** Buttons in the list; a click puts the example in the editor. */
export function showExamples(list: HTMLElement, base: string, choose: (sql: string) => void): void {
  list.replaceChildren(
    ...examples(base).map((example) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "example";
      button.textContent = example.name;
      button.title = example.sql;
      button.addEventListener("click", () => choose(example.sql));
      return button;
    }),
  );
}
