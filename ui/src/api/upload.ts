// An upload with progress: the file streamed as the raw request body (POST .../resources?path=...), through
// XMLHttpRequest because fetch reports no upload progress. The answer is the stored version, or an ApiError
// with the server's message (413 over a limit, 400 at the path).
import { ApiError, authHeaders, baseUrl, errorOf } from "./client";
import { tApi } from "./strings";

export interface StoredVersion {
  path?: string;
  version?: number;
  size?: number;
  sha256?: string;
}

export function uploadFile(
  project: string,
  path: string,
  file: Blob,
  description: string,
  onProgress: (loaded: number, total: number) => void,
  makeRequest: () => XMLHttpRequest = () => new XMLHttpRequest(),
): Promise<StoredVersion> {
  const q = new URLSearchParams({ path });
  if (description.trim()) q.set("description", description.trim());
  const url = `${baseUrl()}/api/v1/projects/${encodeURIComponent(project)}/resources?${q.toString()}`;
  return new Promise((resolve, reject) => {
    const xhr = makeRequest();
    xhr.open("POST", url);
    xhr.withCredentials = true;
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    for (const [name, value] of Object.entries(authHeaders("POST"))) xhr.setRequestHeader(name, value);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      let body: unknown;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = undefined;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(file.size, file.size);
        resolve(body as StoredVersion);
      } else reject(errorOf(xhr.status, body));
    };
    xhr.onerror = () => reject(new ApiError(0, tApi.unreachable(tApi.uploadCut)));
    xhr.send(file);
  });
}
