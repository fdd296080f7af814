package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"herd/server/auth"
)

// routes lists every route in one place: the middleware and the routes
// outside the app's session here, then the pages (pageRoutes) and the
// JSON API (apiRoutes), each listed whole just below.
func (s *Server) routes() {
	e := s.e
	e.Use(middleware.RequestID())
	e.Use(s.recoverPanics)
	e.Use(s.logRequests)
	e.Use(s.auth.CheckHost)
	e.Use(securityHeaders)
	e.Use(noStoreAPI)
	e.Use(limitBody(s.maxBody, streamsBody))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if s.metrics != nil && s.metricsToken != "" {
		e.GET("/metrics", echo.WrapHandler(s.metrics.Handler(s.metricsToken)))
	}
	e.GET("/static/*", s.serveStatic)

	app := e.Group("", s.auth.Authenticate, s.auth.CSRF)
	s.pageRoutes(app)
	s.apiRoutes(app.Group("/api"))
}

// pageRoutes lists the pages and the forms they post.
func (s *Server) pageRoutes(app *echo.Group) {
	app.GET("/setup", s.setupPage)
	app.POST("/setup", s.setupSubmit)
	app.GET("/login", s.loginPage)
	app.POST("/login", s.loginSubmit)
	app.GET("/signup", s.signupPage)
	app.POST("/signup", s.signupSubmit)
	app.POST("/logout", s.logoutSubmit)
	app.GET("/auth/oidc/:name/start", s.ssoStart)
	app.GET("/auth/oidc/:name/callback", s.ssoCallback)
	app.GET("/", s.threadListPage, auth.RequireUser)
	app.GET("/threads/new", s.threadNewPage, auth.RequireUser)
	app.GET("/threads/:id", s.threadPage, auth.RequireUser)
	app.GET("/threads/:id/messages", s.threadMessagesFragment, auth.RequireUser)
	app.GET("/threads/:id/preview/*", s.filePreviewFragment, auth.RequireUser)
	app.POST("/threads/:id/rename", s.threadRenameSubmit, auth.RequireUser)
	app.POST("/threads/:id/delete", s.threadDeleteSubmit, auth.RequireUser)
	app.POST("/threads/:id/restore", s.threadRestoreSubmit, auth.RequireUser)
	app.GET("/settings", s.settingsPage, auth.RequireUser, auth.RequireSession)
	app.POST("/settings/preferences", s.preferencesSubmit, auth.RequireUser)
	app.POST("/settings/tokens", s.tokenCreateSubmit, auth.RequireUser, auth.RequireSession)
	app.POST("/settings/tokens/:id/delete", s.tokenDeleteSubmit, auth.RequireUser, auth.RequireSession)
	app.GET("/account", s.accountPage, auth.RequireUser, auth.RequireSession)
	app.POST("/account/password", s.passwordSubmit, auth.RequireUser, auth.RequireSession)
	app.POST("/account/sessions/delete", s.sessionsDeleteSubmit, auth.RequireUser, auth.RequireSession)
	app.POST("/account/sessions/:id/delete", s.sessionDeleteSubmit, auth.RequireUser, auth.RequireSession)
	app.GET("/admin", s.adminPage, auth.RequireAdmin)
	app.GET("/admin/usage", s.adminUsagePage, auth.RequireAdmin)
	app.GET("/admin/audit", s.adminAuditPage, auth.RequireAdmin)
	app.POST("/admin/budgets", s.adminBudgetsSubmit, auth.RequireAdmin)
	app.POST("/admin/settings", s.adminSettingsSubmit, auth.RequireAdmin)
	app.POST("/admin/users", s.adminUserCreateSubmit, auth.RequireAdmin)
	app.POST("/admin/users/:id", s.adminUserUpdateSubmit, auth.RequireAdmin)
	app.POST("/admin/users/:id/delete", s.adminUserDeleteSubmit, auth.RequireAdmin)
	app.POST("/admin/models", s.adminModelCreateSubmit, auth.RequireAdmin)
	app.POST("/admin/models/test", s.adminModelTestSubmit, auth.RequireAdmin)
	app.POST("/admin/models/:name", s.adminModelUpdateSubmit, auth.RequireAdmin)
	app.POST("/admin/models/:name/delete", s.adminModelDeleteSubmit, auth.RequireAdmin)
	app.POST("/admin/limits", s.adminLimitsSubmit, auth.RequireAdmin)
	app.POST("/admin/mcp", s.adminMCPCreateSubmit, auth.RequireAdmin)
	app.POST("/admin/mcp/test", s.adminMCPTestSubmit, auth.RequireAdmin)
	app.POST("/admin/mcp/:name", s.adminMCPUpdateSubmit, auth.RequireAdmin)
	app.POST("/admin/mcp/:name/delete", s.adminMCPDeleteSubmit, auth.RequireAdmin)
	app.POST("/admin/agents", s.adminAgentCreateSubmit, auth.RequireAdmin)
	app.POST("/admin/agents/:name", s.adminAgentUpdateSubmit, auth.RequireAdmin)
	app.POST("/admin/agents/:name/delete", s.adminAgentDeleteSubmit, auth.RequireAdmin)
	app.POST("/admin/users/:id/identities/:identity_id/delete", s.adminUnlinkSubmit, auth.RequireAdmin)
}

// uploadRoute takes files of any size: it streams its body and holds it
// to its own limits (server/files), not to the 1 MB of the rest.
const uploadRoute = "/threads/:id/files"

// streamsBody reports the routes that bound their bodies themselves.
func streamsBody(c echo.Context) bool {
	return c.Request().Method == http.MethodPost && c.Path() == "/api"+uploadRoute
}

// apiRoutes lists the JSON API (docs/API.md) under api, the /api group.
func (s *Server) apiRoutes(api *echo.Group) {
	api.POST("/auth/login", s.apiLogin)
	api.POST("/auth/logout", s.apiLogout, auth.RequireUser)
	api.GET("/auth/me", s.apiMe, auth.RequireUser)
	api.POST("/account/password", s.apiPassword, auth.RequireUser, auth.RequireSession)
	api.GET("/account/preferences", s.apiPreferences, auth.RequireUser)
	api.PUT("/account/preferences", s.apiPreferencesUpdate, auth.RequireUser)
	api.GET("/account/sessions", s.apiSessions, auth.RequireUser, auth.RequireSession)
	api.DELETE("/account/sessions", s.apiSessionsDelete, auth.RequireUser, auth.RequireSession)
	api.DELETE("/account/sessions/:id", s.apiSessionDelete, auth.RequireUser, auth.RequireSession)
	api.GET("/models", s.apiModels, auth.RequireUser)
	api.GET("/settings", s.apiSettings, auth.RequireUser)
	api.PUT("/admin/settings", s.apiAdminSettings, auth.RequireAdmin)
	api.GET("/admin/budgets", s.apiAdminBudgets, auth.RequireAdmin)
	api.PUT("/admin/budgets", s.apiAdminBudgetsPut, auth.RequireAdmin)
	api.GET("/admin/usage", s.apiAdminUsage, auth.RequireAdmin)
	api.GET("/admin/audit", s.apiAdminAudit, auth.RequireAdmin)
	api.GET("/admin/mcp", s.apiAdminMCP, auth.RequireAdmin)
	api.POST("/admin/mcp", s.apiAdminMCPCreate, auth.RequireAdmin)
	api.POST("/admin/mcp/test", s.apiAdminMCPTest, auth.RequireAdmin)
	api.PATCH("/admin/mcp/:name", s.apiAdminMCPUpdate, auth.RequireAdmin)
	api.DELETE("/admin/mcp/:name", s.apiAdminMCPDelete, auth.RequireAdmin)
	api.GET("/admin/models", s.apiAdminModels, auth.RequireAdmin)
	api.POST("/admin/models", s.apiAdminModelCreate, auth.RequireAdmin)
	api.POST("/admin/models/test", s.apiAdminModelTest, auth.RequireAdmin)
	api.PATCH("/admin/models/:name", s.apiAdminModelUpdate, auth.RequireAdmin)
	api.DELETE("/admin/models/:name", s.apiAdminModelDelete, auth.RequireAdmin)
	api.GET("/admin/agents", s.apiAdminAgents, auth.RequireAdmin)
	api.POST("/admin/agents", s.apiAdminAgentCreate, auth.RequireAdmin)
	api.PATCH("/admin/agents/:name", s.apiAdminAgentUpdate, auth.RequireAdmin)
	api.DELETE("/admin/agents/:name", s.apiAdminAgentDelete, auth.RequireAdmin)
	api.GET("/admin/limits", s.apiAdminLimits, auth.RequireAdmin)
	api.PATCH("/admin/limits", s.apiAdminLimitsUpdate, auth.RequireAdmin)
	api.GET("/threads", s.apiThreads, auth.RequireUser)
	api.GET("/search", s.apiSearch, auth.RequireUser)
	api.POST("/threads", s.apiThreadCreate, auth.RequireUser)
	api.GET("/threads/:id", s.apiThread, auth.RequireUser)
	api.GET("/threads/:id/messages", s.apiThreadMessages, auth.RequireUser)
	api.GET("/threads/:id/export", s.apiThreadExport, auth.RequireUser)
	api.PATCH("/threads/:id", s.apiThreadRename, auth.RequireUser)
	api.DELETE("/threads/:id", s.apiThreadDelete, auth.RequireUser)
	api.POST("/threads/:id/restore", s.apiThreadRestore, auth.RequireUser)
	api.POST("/threads/:id/runs", s.apiRunStart, auth.RequireUser)
	api.POST("/threads/:id/runs/:run_id/cancel", s.apiRunCancel, auth.RequireUser)
	api.POST("/threads/:id/runs/:run_id/retry", s.apiRunRetry, auth.RequireUser)
	api.POST("/threads/:id/runs/:run_id/pick", s.apiRunPick, auth.RequireUser)
	api.POST("/threads/:id/runs/:run_id/continue", s.apiRunContinue, auth.RequireUser)
	api.POST("/threads/:id/messages/:message_id/edit", s.apiMessageEdit, auth.RequireUser)
	api.POST("/threads/:id/tasks/:task_id/cancel", s.apiTaskCancel, auth.RequireUser)
	api.GET("/threads/:id/events", s.apiEvents, auth.RequireUser)
	api.GET("/threads/:id/usage", s.apiUsage, auth.RequireUser)
	api.GET("/threads/:id/tool-images/:name", s.apiToolImage, auth.RequireUser)
	api.POST(uploadRoute, s.apiFilesUpload, auth.RequireUser)
	api.GET("/threads/:id/files", s.apiFiles, auth.RequireUser)
	api.GET("/threads/:id/files.zip", s.apiFilesZip, auth.RequireUser)
	api.GET("/threads/:id/files/*", s.apiFile, auth.RequireUser)
	api.DELETE("/threads/:id/files/*", s.apiFileDelete, auth.RequireUser)
	api.GET("/threads/:id/stream", s.stream, s.limitConnects, auth.RequireUser)
	api.GET("/tokens", s.apiTokens, auth.RequireUser, auth.RequireSession)
	api.POST("/tokens", s.apiTokenCreate, auth.RequireUser, auth.RequireSession)
	api.DELETE("/tokens/current", s.apiTokenRevokeSelf, auth.RequireUser)
	api.DELETE("/tokens/:id", s.apiTokenDelete, auth.RequireUser, auth.RequireSession)
	api.GET("/admin/users", s.apiAdminUsers, auth.RequireAdmin)
	api.POST("/admin/users", s.apiAdminUserCreate, auth.RequireAdmin)
	api.PATCH("/admin/users/:id", s.apiAdminUserUpdate, auth.RequireAdmin)
	api.DELETE("/admin/users/:id", s.apiAdminUserDelete, auth.RequireAdmin)
	api.DELETE("/admin/users/:id/identities/:identity_id", s.apiAdminUnlink, auth.RequireAdmin)
	api.Any("/*", func(echo.Context) error { return errNotFound("route") })
}
