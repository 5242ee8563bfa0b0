package clientapi

// Paths of the Messages API, after /v1.
const (
	PathMessages    = "/messages"
	PathCountTokens = "/messages/count_tokens"
	// PathResponses is OpenAI's Responses API.
	PathResponses = "/responses"
)

// IsMessagesPath: p (after /v1) is an endpoint of the Messages API.
func IsMessagesPath(p string) bool { return p == PathMessages || p == PathCountTokens }
