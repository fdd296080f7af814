// The admin console's Test connection buttons (views/admin.templ): with
// this script a test is asked for in place, so the form keeps what was
// typed, its key included, and the answer shows beside the button. Without
// it the button posts the form and the page comes back with the answer on
// top (server/admin_models_page.go testAnswer).

export function testButtons() {
	for (const button of document.querySelectorAll("form button[data-test]")) {
		const form = button.form;
		const answer = document.createElement("output");
		answer.className = "test-answer";
		answer.setAttribute("for", button.id);
		(button.closest(".model-buttons") ?? button).after(answer);
		button.addEventListener("click", (ev) => {
			ev.preventDefault();
			test(form, button, answer);
		});
	}
}

async function test(form, button, answer) {
	button.disabled = true;
	answer.className = "test-answer";
	answer.textContent = "Testing…";
	try {
		const res = await fetch(button.formAction || form.action, {
			method: "POST",
			headers: { Accept: "application/json" },
			body: new URLSearchParams(new FormData(form)),
		});
		const got = await res.json();
		answer.classList.add(got.ok ? "test-ok" : "test-failed");
		answer.textContent = got.ok ? `Connected: ${got.detail}.` : `Test connection failed: ${got.detail}`;
	} catch {
		answer.classList.add("test-failed");
		answer.textContent = "Test connection failed: herd could not be reached.";
	} finally {
		button.disabled = false;
	}
}
