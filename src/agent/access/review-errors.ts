// ReviewUnavailableError in a module of its own: the HTTP guard needs the
// class at start, while reviews.ts (which needs the Kubernetes client) is
// loaded only when TokenReview/SubjectAccessReview are configured, so that
// standalone mode never loads @kubernetes/client-node.
export class ReviewUnavailableError extends Error {
  override name = 'ReviewUnavailableError';
}
