package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestClusterBrowserTitleOnOtherInstance: a page of a thread open in a
// browser on instance B while the thread's first run and its title call
// run on A shows the model's title when it comes, as on one process — in
// the heading, the tab and the sidebar — and counts the title call in the
// lead's usage.
func TestClusterBrowserTitleOnOtherInstance(t *testing.T) {
	const title = "Kyoto trip in March"
	release, env := titlingModel(t, title)
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca := a.signIn()
	var created struct {
		Thread struct{ ID string } `json:"thread"`
	}
	ca.call("POST", "/api/threads", map[string]string{"content": "can you plan my trip to kyoto in march? we have 5 days"}, &created)

	br := newPageBrowser(t)
	br.signIn(b.url)
	br.run("open the thread on B", chromedp.Navigate(b.url+"/threads/"+created.Thread.ID))
	br.waitFor("the thread page live", `document.documentElement.dataset.herdReady === "1" && document.querySelector("#thread-title").textContent !== ""`)
	release()
	br.waitFor("the model's title everywhere on B's page", `(() => {
		const want = "`+title+`";
		const item = document.querySelector('#sidebar-list a[aria-current="page"]');
		return document.querySelector("#thread-title").textContent === want && document.title === want + " · herd"
			&& item?.textContent === want;
	})()`)
	br.waitFor("the title call in the lead's figures", `document.querySelector('[data-usage="lead"]')?.textContent === "596"`)
	br.shot("title-on-b")
	stopHerd(t, a)
	stopHerd(t, b)
}
