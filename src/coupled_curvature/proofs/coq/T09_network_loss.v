(* T9 for a network's own loss: the closed forms' ray hypothesis closed from the network.
   The block is the weight W_l of a hidden layer l of T2's network type: the network is
   plug C (Layer W_l 0 N) (C: the layers before l, any biases; N: the layers after l, every bias
   zero, `unbiased N`; layer l's own bias zero), σ positively homogeneous of degree k, and W_l is
   the (h+1)×(i+1) matrix unflattened from the block vector v ∈ R^{(h+1)(i+1)} by MathComp's
   vec_mx (unflat v = vec_mx vᵀ, linear).  The network's own loss on nS samples x_s with per-sample
   losses ℓ_s of the outputs is
     L(v) = Σ_s ℓ_s(eval σ (plug C (Layer (unflat v) 0 N)) x_s),
   and with p = k^(depth N + 1) (T9_net_homogeneous), f_s = the outputs at w,
     P = Σ_s ⟨∇ℓ_s(f_s), f_s⟩,   Q = Σ_s f_sᵀ∇²ℓ_s(f_s) f_s:
   - T9_net_ray_homogeneous: F_s(t·w) = t^p F_s(w) for every t > 0: the ray hypothesis of
     T09_closed_forms, derived from `net`, so no ray hypothesis is left below;
   - T9_net_ray_closed_forms: d/dt L(tw)|₁ = p·P and d²/dt² L(tw)|₁ = p(p − 1)·P + p²·Q, with
     hypotheses on the ℓ_s only (each differentiable near f_s, its partials differentiable at f_s);
   - T9_net_closed_forms: wᵀg = p·P and wᵀHw = p(p − 1)·P + p²·Q (g, H the gradient and Hessian
     block of L at w), when moreover L is differentiable near w with its partials differentiable
     at w (local hypotheses: a ReLU network meets them off its kinks);
   - T9_net_k1_bound: σ of degree 1 (p = 1), P ≠ 0 and Q ≥ 0 (e.g. convex ℓ_s): wᵀg = P,
     wᵀHw = Q, D = (Q/P²)·cos²∠(w, g) and D ≤ Q/P² (Cauchy–Schwarz).
   The instances are in T09_network_instance.v. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From CoupledCurvature Require Import DefsAnalytic Common T01_analytic T02_homogeneous_rescaling.
From CoupledCurvature Require Import T09_network_homogeneity T09_closed_forms T09_closed_forms_grad.

(* printing only: the block vector's type, 'cV[R]_((i + h * i.+1).+1) (Coq prints it without the
   parentheses, as i + h * i.+1.+1), reads as the size of the weight matrix, (h+1)·(i+1) *)
Notation "''cV[' R ]_ ( h .+1 * i .+1 )" := (matrix_normedModType R (i + h * i.+1) 0)
  (only printing, format "''cV[' R ]_ ( h .+1  *  i .+1 )").
Notation "''I_' ( h .+1 * i .+1 )" := (ordinal (i + h * i.+1).+1)
  (only printing, format "''I_' ( h .+1  *  i .+1 )").

Section Flatten.
Variable R : realType.
Variables h i : nat.

(* the block vector v ∈ R^{(h+1)(i+1)} as the weight matrix W_l (MathComp's vec_mx of vᵀ) *)
Definition unflat (v : matrix_normedModType R (i + h * i.+1) 0) : 'M[R]_(h.+1, i.+1) :=
  @vec_mx R h.+1 i.+1 (v^T : 'rV_(h.+1 * i.+1)).

Lemma unflatZ (t : R) v : unflat (t *: v) = t *: unflat v.
Proof. by rewrite /unflat linearZ /= linearZ. Qed.

Lemma unflatE v (a : 'I_h.+1) (b : 'I_i.+1) : unflat v a b = v (mxvec_index a b) 0.
Proof. by rewrite /unflat !mxE. Qed.
End Flatten.

Lemma near1_gt0 (R : realType) : \forall t \near (1 : R^o), 0 < t.
Proof.
have C : (@id R^o) @ (1 : R^o) --> (1 : R^o) by exact: cvg_id.
exact: (@cvgr_gt R R^o _ _ _ 1 C 0 ltr01).
Qed.

(* D = (Q/P²)·(wᵀg)²/(‖w‖²‖g‖²) ≤ Q/P² when Q ≥ 0 (Cauchy–Schwarz: (wᵀg)² ≤ ‖w‖²‖g‖²) *)
Lemma k1_bound (R : rcfType) n (w g : 'cV[R]_n) (Q P D : R) :
  0 <= Q -> D = Q / P ^+ 2 * (dot w g ^+ 2 / (sqnorm w * sqnorm g)) -> D <= Q / P ^+ 2.
Proof.
move=> Q0 ->; have QP : 0 <= Q / P ^+ 2 by rewrite divr_ge0 // sqr_ge0.
have [d0|d0] := eqVneq (sqnorm w * sqnorm g) 0.
  by rewrite d0 invr0 mulr0 mulr0.
have dpos : 0 < sqnorm w * sqnorm g by rewrite lt0r d0 mulr_ge0 // sqnorm_ge0.
by rewrite ler_pimulr // ler_pdivr_mulr // mul1r cauchy_schwarz.
Qed.

Section NetLoss.
Variable R : realType.
Variables (j h i m nS : nat).
Local Notation V := (matrix_normedModType R (i + h * i.+1) 0).
Local Notation W := (matrix_normedModType R m 0).

(* the ray hypothesis of T9's closed forms, from the network: F(t·w) = t^(k^(depth N + 1)) F(w) *)
Theorem T9_net_ray_homogeneous (sigma : R -> R) (k : nat) (C : ctx R j i.+1)
    (N : net R h.+1 m.+1) (x : 'cV[R]_j) (w : V) (t : R) :
  (forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z) -> unbiased N -> 0 < t ->
  eval sigma (plug C (Layer (unflat (t *: w)) 0 N)) x
  = t ^+ (k ^ (depth N).+1) *: eval sigma (plug C (Layer (unflat w) 0 N)) x.
Proof. by move=> sh uN t0; rewrite unflatZ (T9_net_homogeneous sh). Qed.

Definition net_out (sigma : R -> R) (C : ctx R j i.+1) (N : net R h.+1 m.+1)
    (x : 'I_nS -> 'cV[R]_j) (s : 'I_nS) (v : V) : W :=
  eval sigma (plug C (Layer (unflat v) 0 N)) (x s).

Lemma net_ray_near (sigma : R -> R) (k : nat) (C : ctx R j i.+1) (N : net R h.+1 m.+1)
    (x : 'I_nS -> 'cV[R]_j) (w : V) :
  (forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z) -> unbiased N ->
  forall s, \forall t \near (1 : R^o),
    (eval sigma (plug C (Layer (unflat (t *: w)) 0 N)) (x s) : W)
    = t ^+ (k ^ (depth N).+1) *: (eval sigma (plug C (Layer (unflat w) 0 N)) (x s) : W).
Proof.
move=> sh uN s; apply: filterS (near1_gt0 R) => t t0.
exact: T9_net_ray_homogeneous.
Qed.

(* the radial derivatives of the network's own loss: hypotheses on the per-sample losses only *)
Theorem T9_net_ray_closed_forms (sigma : R -> R) (k : nat) (C : ctx R j i.+1)
    (N : net R h.+1 m.+1) (x : 'I_nS -> 'cV[R]_j) (ell : 'I_nS -> W -> R^o) (w : V) :
  let f := fun s => (eval sigma (plug C (Layer (unflat w) 0 N)) (x s) : W) in
  let L := fun v : V => \sum_(s < nS) ell s (eval sigma (plug C (Layer (unflat v) 0 N)) (x s)) in
  let p := (k ^ (depth N).+1)%N in
  let P := \sum_(s < nS) dot (grad (ell s) (f s)) (f s) in
  let Q := \sum_(s < nS) quad (hess (ell s) (f s)) (f s) in
  (forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z) -> unbiased N ->
  (forall s, differentiable_near (ell s) (f s)) ->
  (forall s a, differentiable (fun y : W => (d1 (ell s) (e a) y : R^o)) (f s)) ->
  d1 L w w = p%:R * P /\ d2 L w w w = p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q.
Proof.
move=> f L p P Q sh uN dl dD.
have d1l s := ray_derivable_near (dl s).
have d2l s := d1_derivable (dl s) (dD s).
have [E1 E2] := @T9_ray_closed_forms R _ m nS _ (net_out sigma C N x) ell w (net_ray_near C x w sh uN) d1l d2l.
have EP : \sum_(s < nS) d1 (ell s) (f s) (f s) = P.
  by apply: eq_bigr => s _; rewrite d1_dot_grad //; exact: nbhs_singleton (dl s).
have EQ : \sum_(s < nS) d2 (ell s) (f s) (f s) (f s) = Q.
  by apply: eq_bigr => s _; rewrite quad_hess.
by split; [rewrite E1 EP | rewrite E2 EP EQ].
Qed.

(* T9's closed forms for the network's own loss: wᵀg = p·P and wᵀHw = p(p − 1)·P + p²·Q *)
Theorem T9_net_closed_forms (sigma : R -> R) (k : nat) (C : ctx R j i.+1)
    (N : net R h.+1 m.+1) (x : 'I_nS -> 'cV[R]_j) (ell : 'I_nS -> W -> R^o) (w : V) :
  let f := fun s => (eval sigma (plug C (Layer (unflat w) 0 N)) (x s) : W) in
  let L := fun v : V => \sum_(s < nS) ell s (eval sigma (plug C (Layer (unflat v) 0 N)) (x s)) in
  let p := (k ^ (depth N).+1)%N in
  let P := \sum_(s < nS) dot (grad (ell s) (f s)) (f s) in
  let Q := \sum_(s < nS) quad (hess (ell s) (f s)) (f s) in
  (forall c z : R, 0 < c -> sigma (c * z) = c ^+ k * sigma z) -> unbiased N ->
  (forall s, differentiable_near (ell s) (f s)) ->
  (forall s a, differentiable (fun y : W => (d1 (ell s) (e a) y : R^o)) (f s)) ->
  differentiable_near L w -> (forall a, differentiable (fun y : V => (d1 L (e a) y : R^o)) w) ->
  dot w (grad L w) = p%:R * P /\ quad (hess L w) w = p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q.
Proof.
move=> f L p P Q sh uN dl dD dL dLD.
exact: (@T9_closed_forms_grad R _ m nS _ (net_out sigma C N x) ell w (net_ray_near C x w sh uN) dl dD dL dLD).
Qed.

(* k = 1: wᵀg = P, wᵀHw = Q, D = (Q/P²)·cos²∠(w, g) and D ≤ Q/P² *)
Theorem T9_net_k1_bound (sigma : R -> R) (C : ctx R j i.+1)
    (N : net R h.+1 m.+1) (x : 'I_nS -> 'cV[R]_j) (ell : 'I_nS -> W -> R^o) (w : V) :
  let f := fun s => (eval sigma (plug C (Layer (unflat w) 0 N)) (x s) : W) in
  let L := fun v : V => \sum_(s < nS) ell s (eval sigma (plug C (Layer (unflat v) 0 N)) (x s)) in
  let P := \sum_(s < nS) dot (grad (ell s) (f s)) (f s) in
  let Q := \sum_(s < nS) quad (hess (ell s) (f s)) (f s) in
  (forall c z : R, 0 < c -> sigma (c * z) = c ^+ 1 * sigma z) -> unbiased N ->
  (forall s, differentiable_near (ell s) (f s)) ->
  (forall s a, differentiable (fun y : W => (d1 (ell s) (e a) y : R^o)) (f s)) ->
  differentiable_near L w -> (forall a, differentiable (fun y : V => (d1 L (e a) y : R^o)) w) ->
  P != 0 -> 0 <= Q ->
  [/\ dot w (grad L w) = P, quad (hess L w) w = Q,
      coupledD w (grad L w) (hess L w)
      = Q / P ^+ 2 * (dot w (grad L w) ^+ 2 / (sqnorm w * sqnorm (grad L w)))
    & coupledD w (grad L w) (hess L w) <= Q / P ^+ 2].
Proof.
move=> f L P Q sh uN dl dD dL dLD P0 Q0.
have hom s : \forall t \near (1 : R^o),
    (eval sigma (plug C (Layer (unflat (t *: w)) 0 N)) (x s) : W) = t ^+ 1 *: f s.
  by apply: filterS (net_ray_near C x w sh uN s) => t ->; rewrite exp1n.
have [E1 E2 E3] := @T9_k1_closed_forms_grad R _ m nS (net_out sigma C N x) ell w hom dl dD dL dLD P0.
by split => //; exact: (k1_bound Q0 E3).
Qed.
End NetLoss.
