// The thread's WebSocket (docs/API.md), reconnecting with backoff: each
// connection asks for what came after the last seq the page has, so a
// reconnect misses nothing.

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 5000;
// Closes that mean "you may not have this stream": retrying cannot help.
const FATAL_CLOSE_CODES = new Set([1008, 4401, 4403, 4404]);
// The account holds as many sockets as the server allows (other tabs): a
// slot frees when one of them closes, so keep trying, slowly.
const CLOSE_TOO_MANY_SOCKETS = 4429;
const CROWDED_SETTLE_MS = 1000;

// openStream connects to url() (asked again on every reconnect) and
// hands each raw frame to onFrame; onOpen runs on every connect, onStatus
// gets the connection line's text ("" when connected) and whether the
// server is out of reach (its controls cannot work meanwhile).
export function openStream({ url, onFrame, onOpen, onStatus }) {
	let retryDelay = RECONNECT_MIN_MS;
	let crowded = false; // the last close said the account has too many sockets
	const connect = () => {
		const socket = new WebSocket(url());
		socket.addEventListener("open", () => {
			retryDelay = RECONNECT_MIN_MS;
			// A socket over the cap opens and is closed at once: its notice
			// stays until a socket has stayed open a moment.
			const connected = () => {
				if (socket.readyState !== WebSocket.OPEN) return;
				crowded = false;
				onStatus("");
			};
			if (crowded) setTimeout(connected, CROWDED_SETTLE_MS);
			else connected();
			onOpen();
		});
		socket.addEventListener("message", (ev) => onFrame(ev.data));
		// "error" is always followed by "close", so close alone decides.
		socket.addEventListener("close", (ev) => {
			if (FATAL_CLOSE_CODES.has(ev.code)) {
				onStatus("Session ended. Reload the page to continue.");
				return;
			}
			crowded = ev.code === CLOSE_TOO_MANY_SOCKETS;
			if (crowded) {
				onStatus("Too many open tabs for this account: live updates resume when you close one.");
				retryDelay = RECONNECT_MAX_MS;
			} else {
				onStatus("Reconnecting…", true);
			}
			setTimeout(connect, retryDelay);
			retryDelay = Math.min(retryDelay * 2, RECONNECT_MAX_MS);
		});
	};
	connect();
}
