// The JSON API as the page calls it: posts carry the page's CSRF token,
// and a failed request reads as the server's error message (docs/API.md).

export function post(path, body) {
	const headers = { "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]')?.content ?? "" };
	if (body !== undefined) headers["Content-Type"] = "application/json";
	return fetch(path, {
		method: "POST",
		headers,
		body: body === undefined ? undefined : JSON.stringify(body),
	});
}

export async function errorMessage(res) {
	try {
		const body = await res.json();
		if (body?.error?.message) return body.error.message;
	} catch {
		// Not JSON (a proxy's error page): fall through to the status.
	}
	return `The request failed (HTTP ${res.status}).`;
}

export async function getJSON(path) {
	const res = await fetch(path);
	if (!res.ok) throw new Error(await errorMessage(res));
	return res.json();
}

// postFromButton posts to path with button disabled until the answer
// comes; a refusal shows the server's message through showError, an
// unreachable server shows unreachable.
export async function postFromButton(button, path, showError, unreachable) {
	button.disabled = true;
	try {
		const res = await post(path);
		if (!res.ok) showError(await errorMessage(res));
	} catch {
		showError(unreachable);
	} finally {
		button.disabled = false;
	}
}
