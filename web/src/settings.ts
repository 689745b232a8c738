// The S3 settings panel. Endpoint, region, anonymous access, the coordinator's function URL
// and the place policy become session settings;
// keys go to the engine worker's memory (and this page's, to survive a cancel) and nowhere
// else: no storage, no URL, no log. The key fields are emptied once the keys are sent.

import type { EngineClient } from "./engine";

const ANONYMOUS = "quiver.s3_anonymous";

export function setUpS3Settings(engine: EngineClient, linked: URLSearchParams): void {
  const field = (id: string) => document.getElementById(id) as HTMLInputElement;
  const endpoint = field("s3-endpoint");
  const region = field("s3-region");
  const accessKeyId = field("s3-access-key-id");
  const secretAccessKey = field("s3-secret-access-key");
  const sessionToken = field("s3-session-token");
  const anonymous = field("s3-anonymous");
  const functionUrl = field("function-url");
  const place = document.getElementById("place") as HTMLSelectElement;
  const status = document.getElementById("s3-status")!;
  const form = document.getElementById("s3-settings") as HTMLFormElement;
  // A link's settings (main.ts applies them) show in the form.
  endpoint.value = linked.get("quiver.s3_endpoint") ?? "";
  region.value = linked.get("quiver.s3_region") ?? "";
  anonymous.checked = linked.get(ANONYMOUS) === "true";
  functionUrl.value = linked.get("quiver.function_url") ?? "";
  place.value = linked.get("quiver.place") ?? "fastest";

  // An empty field means the default: it is sent only to undo a value set before.
  const apply = async (key: string, value: string) => {
    if (value || engine.setting(key)) await engine.set(key, value);
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "Applying…";
    try {
      await apply("quiver.s3_endpoint", endpoint.value.trim());
      await apply("quiver.s3_region", region.value.trim());
      if (anonymous.checked || engine.setting(ANONYMOUS)) await engine.set(ANONYMOUS, String(anonymous.checked));
      // With a function URL, each query runs here or on Lambda by the place policy.
      await apply("quiver.function_url", functionUrl.value.trim());
      await apply("quiver.place", place.value === "fastest" ? "" : place.value);
      if (secretAccessKey.value) {
        await engine.setCredentials({
          accessKeyId: accessKeyId.value.trim(),
          secretAccessKey: secretAccessKey.value,
          sessionToken: sessionToken.value || undefined,
        });
        secretAccessKey.value = "";
        sessionToken.value = "";
      }
      status.textContent = engine.hasCredentials ? "Applied; keys are held in this page's memory only." : "Applied.";
    } catch (error) {
      status.textContent = error instanceof Error ? error.message : String(error);
    }
  });

  document.getElementById("s3-forget")!.addEventListener("click", async () => {
    accessKeyId.value = "";
    secretAccessKey.value = "";
    sessionToken.value = "";
    try {
      await engine.forgetCredentials();
      status.textContent = "Keys forgotten.";
    } catch (error) {
      status.textContent = error instanceof Error ? error.message : String(error);
    }
  });
}
