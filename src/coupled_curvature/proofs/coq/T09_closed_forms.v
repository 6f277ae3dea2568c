(* T9, the network closed forms along the ray (the SymPy derivation's steps, stated in general).
   A block loss L(v) = Σ_i ℓ_i(F_i(v)) (N samples, block v ∈ R^{n+1}, outputs F_i(v) ∈ R^{m+1},
   ℓ_i a per-sample loss of the outputs) whose outputs are positively homogeneous of degree p
   along the ray through w, only for t near 1:  F_i(t·w) = t^p·F_i(w).  With f_i = F_i(w),
     P = Σ_i ∂ℓ_i(f_i)[f_i]   (= Σ_i ⟨∇ℓ_i(f_i), f_i⟩),
     Q = Σ_i ∂²ℓ_i(f_i)[f_i, f_i]   (= Σ_i f_iᵀ∇²ℓ_i(f_i) f_i),
   T9_ray_closed_forms gives the radial derivatives of L at w:
     d1 L w w = p·P  and  d2 L w w w = p(p − 1)·P + p²·Q,
   with local hypotheses only (ℓ_i derivable along f_i at s·f_i for s near 1, the directional
   derivative y |-> ∂ℓ_i(y)[f_i] derivable at f_i along f_i), through the ray function
   φ(t) = L(t·w) = Σ_i ℓ_i(t^p f_i) near 1 (d1/d2 of L at w along w are φ'(1), φ''(1) with no
   hypothesis: ray_d1_1, ray_d2).  For k = 1 (p = 1) T9_k1_closed_forms adds L differentiable near
   w and its partials differentiable at w, and gives wᵀg = P, wᵀHw = Q (quad_hess: wᵀHw is the
   second directional derivative along w) and, when P ≠ 0, D = (Q/P²)·(wᵀg)²/(‖w‖²‖g‖²).
   Not here: the bound D ≤ Q/P² (Cauchy–Schwarz and Q ≥ 0), the grad/hess forms of P and Q for
   ℓ_i (in T09_closed_forms_grad.v), and the homogeneity of a deep network's outputs (T2 is the
   layer law).
   Instance T9_closed_forms_instance: one sample, F(v) = v (one weight, input 1), ℓ(f) = f², at
   w = 1: every hypothesis holds and P = 2 <> 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive realfun.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic T01_analytic.
Section OneDim.
Variable R : realType.
(* the first and second derivatives of a function of one real variable *)
Definition D1 (g : R^o -> R^o) (t : R) : R := derive g t 1.
Definition D2 (g : R^o -> R^o) (t : R) : R := derive (fun s : R^o => (D1 g s : R^o)) t 1.
End OneDim.

Section Ray.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Definition ray (f : V -> R^o) (x : V) : R^o -> R^o := fun s => f (s *: x).

Lemma ray_dq (f : V -> R^o) (x : V) (t : R) :
  (fun h : R => h^-1 *: ((f \o shift (t *: x)) (h *: x) - f (t *: x)))
  = (fun h : R => h^-1 *: ((ray f x \o shift t) (h *: (1 : R^o)) - ray f x t)).
Proof. by apply/funext => h /=; rewrite /ray scalerDl regular_scaleE mulr1. Qed.

Lemma ray_d1 (f : V -> R^o) (x : V) (t : R) : d1 f x (t *: x) = D1 (ray f x) t.
Proof. by rewrite /d1 /D1 /derive ray_dq. Qed.

Lemma ray_derivable (f : V -> R^o) (x : V) (t : R) :
  derivable f (t *: x) x <-> derivable (ray f x) t 1.
Proof. by rewrite /derivable ray_dq. Qed.

Lemma ray_dq1 (f : V -> R^o) (x : V) :
  (fun h : R => h^-1 *: ((f \o shift x) (h *: x) - f x))
  = (fun h : R => h^-1 *: ((ray f x \o shift 1) (h *: (1 : R^o)) - ray f x 1)).
Proof. by apply/funext => h /=; rewrite /ray scalerDl regular_scaleE mulr1 scale1r. Qed.

Lemma ray_d1_1 (f : V -> R^o) (x : V) : d1 f x x = D1 (ray f x) 1.
Proof. by rewrite /d1 /D1 /derive ray_dq1. Qed.

Lemma ray_derivable1 (f : V -> R^o) (x : V) :
  derivable f x x <-> derivable (ray f x) 1 1.
Proof. by rewrite /derivable ray_dq1. Qed.

Lemma ray_d2 (f : V -> R^o) (x : V) : d2 f x x x = D2 (ray f x) 1.
Proof.
rewrite /d2 -/(d1 (fun y : V => (d1 f x y : R^o)) x x) ray_d1_1 /D2.
have -> : ray (fun y : V => (d1 f x y : R^o)) x = (fun s : R^o => (D1 (ray f x) s : R^o)).
  by apply/funext => s; rewrite /ray ray_d1.
by [].
Qed.
(* under local hypotheses, wᵀHw is the second directional derivative along w *)
Lemma quad_hess (L : V -> R^o) (w : V) :
  differentiable_near L w ->
  (forall j, differentiable (fun y : V => (d1 L (e j) y : R^o)) w) ->
  quad (hess L w) w = d2 L w w w.
Proof.
move=> dL dD; rewrite /d2.
pose G k : V -> R^o := w k 0 \*: (fun y : V => (d1 L (e k) y : R^o)).
rewrite (@derive_near_eq _ _ _ (\sum_k G k)); last first.
  apply: (@filterS _ (nbhs w)) dL => y dy.
  rewrite derive_grad // fct_sumE mxE.
  by apply: eq_bigr => k _; rewrite !mxE.
rewrite derive_sum; last by move=> k; apply/derivableZ/diff_derivable/dD.
have -> : \sum_k derive (G k) w w = \sum_k \sum_i w k 0 * (w i 0 * hess L w i k).
  apply: eq_bigr => k _; rewrite deriveZ; last exact/diff_derivable/dD.
  rewrite -/(d1 (fun y : V => (d1 L (e k) y : R^o)) w w) derive_grad // mxE regular_scaleE big_distrr /=.
  by apply: eq_bigr => i _; rewrite !mxE.
have -> : quad (hess L w) w = \sum_i \sum_j w i 0 * (hess L w i j * w j 0).
  by rewrite /quad /dot mxE; apply: eq_bigr => i _; rewrite !mxE big_distrr.
rewrite exchange_big; apply: eq_bigr => k _; apply: eq_bigr => i _.
by rewrite [hess _ _ _ _ * _]mulrC mulrCA.
Qed.
End Ray.

Section Pow.
Variable R : realType.
Lemma D1_comp (f g : R^o -> R^o) (x : R) :
  derivable f x 1 -> derivable g (f x) 1 ->
  derivable (g \o f) x 1 /\ D1 (g \o f) x = D1 g (f x) * D1 f x.
Proof.
move=> df dg.
have P := @derivable1_diffP R [normedModType R of R^o].
have df' := (P f x).1 df.
have dg' := (P g (f x)).1 dg.
have dc := @differentiable_comp R _ _ _ f g x df' dg'.
split; first exact: (P _ _).2.
have := @derive1_comp R f g x df dg.
rewrite !derive1E. by [].
Qed.

Definition pw (p : nat) : R^o -> R^o := fun t => t ^+ p.

Lemma pw_derive (p : nat) (t : R) :
  derivable (pw p) t 1 /\ D1 (pw p) t = p%:R * t ^+ p.-1.
Proof.
case: p => [|k].
  have -> : pw 0 = cst 1 by apply/funext => s; rewrite /pw expr0.
  by split; [exact: derivable_cst | rewrite /D1 derive_val mul0r].
have F m : pw m = (@id R^o) ^+ m.
  elim: m => [|m IH]; apply/funext => s; first by rewrite /pw expr0.
  by rewrite /pw !exprS -IH.
rewrite F; split; first by apply: derivableX; exact: derivable_id.
rewrite /D1 deriveX; last exact: derivable_id.
have -> : 'D_1 (@id R^o) t = 1 by rewrite derive_val.
by rewrite regular_scaleE mulr1.
Qed.

Lemma pw_near (p : nat) (P : R -> Prop) :
  (\forall s \near (1 : R^o), P s) -> \forall t \near (1 : R^o), P (t ^+ p).
Proof.
move=> HP; have C : (pw p) @ (1 : R^o) --> (1 : R^o).
  have := @exprn_continuous R p 1; rewrite expr1n; exact.
exact: C.
Qed.

(* the chain rule for phi = psi(t^p) near 1, to second order *)
Lemma pow_chain (psi phi : R^o -> R^o) (p : nat) :
  (\forall t \near (1 : R^o), phi t = psi (t ^+ p)) ->
  (\forall s \near (1 : R^o), derivable psi s 1) ->
  derivable (fun s : R^o => (D1 psi s : R^o)) 1 1 ->
  [/\ \forall t \near (1 : R^o), derivable phi t 1,
      D1 phi 1 = p%:R * D1 psi 1,
      derivable (fun t : R^o => (D1 phi t : R^o)) 1 1 &
      D2 phi 1 = p%:R * (p%:R - 1) * D1 psi 1 + p%:R ^+ 2 * D2 psi 1].
Proof.
move=> E dpsi d2psi.
have dpp := pw_near p dpsi.
have loc : \forall t \near (1 : R^o), derivable phi t 1 /\
    D1 phi t = D1 psi (t ^+ p) * (p%:R * t ^+ p.-1).
  move: (@near_join [topologicalType of R^o] 1 _ E) dpp; apply: filterS2 => t Et dt.
  have [dc Dc] := D1_comp (pw_derive p t).1 dt.
  have Et' : \forall u \near t, (psi \o pw p) u = phi u.
    by apply: filterS Et => u ->.
  split; first exact: derivable_near_eq Et' dc.
  by rewrite /D1 -(derive_near_eq _ Et') -/(D1 _ _) Dc (pw_derive p t).2.
have e1 : pw p 1 = 1 by rewrite /pw expr1n.
pose g1 : R^o -> R^o := (fun s : R^o => (D1 psi s : R^o)) \o pw p.
pose g2 : R^o -> R^o := p%:R \*: pw p.-1.
have d2' : derivable (fun s : R^o => (D1 psi s : R^o)) (pw p 1) 1 by rewrite e1.
have [dg1 Dg1] := D1_comp (pw_derive p 1).1 d2'.
have dg2 : derivable g2 1 1 by apply: derivableZ; exact: (pw_derive _ _).1.
have EG : \forall t \near (1 : R^o), (g1 * g2) t = (D1 phi t : R^o).
  by apply: filterS loc => t [_ ->].
have dG := @derivableM R [normedModType R of R^o] g1 g2 1 1 dg1 dg2.
split.
- by apply: filterS loc => t [].
- by have [_ ->] := @nbhs_singleton [topologicalType of R^o] _ _ loc; rewrite !expr1n mulr1 mulrC.
- exact: (@derivable_near_eq R [normedModType R of R^o] _ _ 1 1 EG dG).
rewrite /D2 -(@derive_near_eq R [normedModType R of R^o] _ _ 1 1 EG).
rewrite (@deriveM R [normedModType R of R^o] g1 g2 1 1 dg1 dg2) deriveZ; last exact: (pw_derive _ _).1.
rewrite -/(D1 g1 1) -/(D1 (pw p.-1) 1) Dg1 (pw_derive p 1).2 (pw_derive p.-1 1).2 e1.
rewrite -/(D2 psi 1) /g1 /g2 /= /pw !expr1n !mulr1 !regular_scaleE mulr1.
case: p {E dpsi dpp loc e1 d2' dg1 Dg1 dg2 EG dG g1 g2} => [|k]; first by rewrite expr2 !(mul0r, mulr0, addr0).
rewrite /= mulrSr addrK.
have -> : D1 (fun s : R^o => (D1 psi s : R^o)) 1 = D2 psi 1 by [].
by rewrite [D1 psi 1 * _]mulrC expr2 [_ * (D2 psi 1 * _)]mulrCA [D2 psi 1 * _]mulrC.
Qed.

Lemma sum_chain (N : nat) (psi : 'I_N -> R^o -> R^o) :
  (forall i, \forall s \near (1 : R^o), derivable (psi i) s 1) ->
  (forall i, derivable (fun s : R^o => (D1 (psi i) s : R^o)) 1 1) ->
  [/\ \forall s \near (1 : R^o), derivable (\sum_i psi i) s 1,
      derivable (fun s : R^o => (D1 (\sum_i psi i) s : R^o)) 1 1,
      D1 (\sum_i psi i) 1 = \sum_i D1 (psi i) 1 &
      D2 (\sum_i psi i) 1 = \sum_i D2 (psi i) 1].
Proof.
move=> d1p d2p.
have dall : \forall s \near (1 : R^o), forall i, derivable (psi i) s 1.
  exact: (@filter_forall _ _ _ (nbhs (1 : R^o)) _ d1p).
have ES : \forall s \near (1 : R^o),
    (\sum_i (fun t : R^o => (D1 (psi i) t : R^o))) s = (D1 (\sum_i psi i) s : R^o).
  apply: (@filterS _ (nbhs (1 : R^o))) dall => s ds; rewrite fct_sumE /D1 derive_sum //.
have dS : derivable (\sum_i (fun t : R^o => (D1 (psi i) t : R^o))) 1 1 by exact: derivable_sum.
split.
- by apply: (@filterS _ (nbhs (1 : R^o))) dall => s ds; exact: derivable_sum.
- exact: (@derivable_near_eq R [normedModType R of R^o] _ _ 1 1 ES dS).
- have d11 : forall i, derivable (psi i) 1 1 := @nbhs_singleton [topologicalType of R^o] _ _ dall.
  by rewrite /D1 (@derive_sum R [normedModType R of R^o] [normedModType R of R^o] N psi 1 1 d11).
rewrite /D2 -(@derive_near_eq R [normedModType R of R^o] _ _ 1 1 ES) derive_sum //.
Qed.
End Pow.

Section Network.
Variable R : realType.
Variables n m N : nat.
Local Notation V := (matrix_normedModType R n 0).
Local Notation W := (matrix_normedModType R m 0).

Theorem T9_ray_closed_forms (p : nat) (F : 'I_N -> V -> W) (ell : 'I_N -> W -> R^o) (w : V) :
  let L := fun v : V => \sum_(i < N) ell i (F i v) in
  let P := \sum_(i < N) d1 (ell i) (F i w) (F i w) in
  let Q := \sum_(i < N) d2 (ell i) (F i w) (F i w) (F i w) in
  (forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ p *: F i w) ->
  (forall i, \forall s \near (1 : R^o), derivable (ell i) (s *: F i w) (F i w)) ->
  (forall i, derivable (fun y : W => (d1 (ell i) (F i w) y : R^o)) (F i w) (F i w)) ->
  d1 L w w = p%:R * P /\ d2 L w w w = p%:R * (p%:R - 1) * P + p%:R ^+ 2 * Q.
Proof.
move=> L P Q hom d1l d2l.
pose psi i : R^o -> R^o := ray (ell i) (F i w).
have dpsi i : \forall s \near (1 : R^o), derivable (psi i) s 1.
  by apply: (@filterS _ (nbhs (1 : R^o))) (d1l i) => s; rewrite ray_derivable.
have d2psi i : derivable (fun s : R^o => (D1 (psi i) s : R^o)) 1 1.
  have -> : (fun s : R^o => (D1 (psi i) s : R^o))
          = ray (fun y : W => (d1 (ell i) (F i w) y : R^o)) (F i w).
    by apply/funext => s; rewrite /ray ray_d1.
  by rewrite -ray_derivable1.
have [dS d2S D1S D2S] := sum_chain dpsi d2psi.
have hall : \forall t \near (1 : R^o), forall i, F i (t *: w) = t ^+ p *: F i w.
  exact: (@filter_forall _ _ _ (nbhs (1 : R^o)) _ hom).
have E : \forall t \near (1 : R^o), ray L w t = (\sum_i psi i) (t ^+ p).
  apply: (@filterS _ (nbhs (1 : R^o))) hall => t ht.
  by rewrite /ray /L fct_sumE; apply: eq_bigr => i _; rewrite ht.
have [_ D1L _ D2L] := pow_chain E dS d2S.
have S1 : \sum_i D1 (psi i) 1 = P by apply: eq_bigr => i _; rewrite ray_d1_1.
have S2 : \sum_i D2 (psi i) 1 = Q by apply: eq_bigr => i _; rewrite ray_d2.
split.
  rewrite (ray_d1_1 L w).
  rewrite D1L.
  rewrite D1S.
  by rewrite S1.
rewrite (ray_d2 L w).
rewrite D2L.
rewrite D1S D2S.
by rewrite S1 S2.
Qed.

(* k = 1 (p = 1): wᵀg = P, wᵀHw = Q and D = (Q/P²)·cos²∠(w, g), under local hypotheses *)
Theorem T9_k1_closed_forms (F : 'I_N -> V -> W) (ell : 'I_N -> W -> R^o) (w : V) :
  let L := fun v : V => \sum_(i < N) ell i (F i v) in
  let P := \sum_(i < N) d1 (ell i) (F i w) (F i w) in
  let Q := \sum_(i < N) d2 (ell i) (F i w) (F i w) (F i w) in
  (forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 1 *: F i w) ->
  (forall i, \forall s \near (1 : R^o), derivable (ell i) (s *: F i w) (F i w)) ->
  (forall i, derivable (fun y : W => (d1 (ell i) (F i w) y : R^o)) (F i w) (F i w)) ->
  differentiable_near L w ->
  (forall j, differentiable (fun y : V => (d1 L (e j) y : R^o)) w) ->
  P != 0 ->
  [/\ dot w (grad L w) = P, quad (hess L w) w = Q &
      coupledD w (grad L w) (hess L w)
      = Q / P ^+ 2 * (dot w (grad L w) ^+ 2 / (sqnorm w * sqnorm (grad L w)))].
Proof.
move=> L P Q hom d1l d2l dL dD P0.
have [E1 E2] := T9_ray_closed_forms hom d1l d2l.
have E1' : d1 L w w = 1%:R * P := E1.
have E2' : d2 L w w w = 1%:R * (1%:R - 1) * P + 1%:R ^+ 2 * Q := E2.
have wg : dot w (grad L w) = P.
  rewrite /dot -derive_grad; last exact: (nbhs_singleton dL).
  by rewrite -/(d1 L w w) E1' mul1r.
have wHw : quad (hess L w) w = Q.
  by rewrite quad_hess // E2' subrr mulr0 mul0r add0r expr1n mul1r.
split => //; rewrite /coupledD /RQ wHw wg.
by rewrite [RHS]mulrA -(mulrA Q) mulVf ?expf_neq0 // mulr1 invfM mulrA.
Qed.
End Network.

(* the pinned instance: one sample, the one-weight linear network F(v) = v (output = weight ×
   input 1), squared loss ℓ(f) = f², at w = 1: every hypothesis of T9_ray_closed_forms (p = 1)
   and of T9_k1_closed_forms holds, and P = ℓ'(f)·f = 2 <> 0, so wᵀg = 2 *)
Theorem T9_closed_forms_instance (R : realType) :
  let F : 'I_1 -> matrix_normedModType R 0 0 -> matrix_normedModType R 0 0 := fun _ v => v in
  let ell : 'I_1 -> matrix_normedModType R 0 0 -> R^o := fun _ f => f 0 0 ^+ 2 in
  let w : matrix_normedModType R 0 0 := const_mx 1 in
  let L := fun v : matrix_normedModType R 0 0 => \sum_(i < 1) ell i (F i v) in
  [/\ forall i, \forall t \near (1 : R^o), F i (t *: w) = t ^+ 1 *: F i w,
      forall i, \forall s \near (1 : R^o), derivable (ell i) (s *: F i w) (F i w),
      forall i, derivable (fun y => (d1 (ell i) (F i w) y : R^o)) (F i w) (F i w),
      differentiable_near L w /\ (forall j, differentiable (fun y => (d1 L (e j) y : R^o)) w) &
      \sum_(i < 1) d1 (ell i) (F i w) (F i w) = 2%:R].
Proof.
move=> F ell w L.
have Eell i : ell i = @sq0 R by apply/funext => v; rewrite /ell expr2.
have EL : L = @sq0 R by apply/funext => v; rewrite /L big_ord1 /F Eell.
have Ew : w = e 0 by apply/matrixP => i j; rewrite !ord1 !mxE.
have dsq (y : matrix_normedModType R 0 0) : differentiable (@sq0 R) y.
  by apply: differentiableM; exact: differentiable_coord.
have dsq1 : differentiable (fun y => (d1 (@sq0 R) (e 0) y : R^o)) (e 0 : matrix_normedModType R 0 0).
  by rewrite sq0_d1; apply: differentiableZ; exact: differentiable_coord.
rewrite /F EL Ew; split.
- move=> i; apply: (@nearW _ _ _ (@nbhs_pfilter [topologicalType of R^o] 1)) => t.
  by rewrite expr1.
- move=> i; rewrite Eell; apply: (@nearW _ _ _ (@nbhs_pfilter [topologicalType of R^o] 1)) => s.
  exact/diff_derivable/dsq.
- by move=> i; rewrite Eell; exact/diff_derivable/dsq1.
- split; first by rewrite /differentiable_near; near=> y; exact: dsq.
  by move=> j; rewrite (ord1 j).
rewrite big_ord1 Eell.
have := congr1 (fun f => f (e 0)) (@sq0_d1 R); rewrite /= => ->.
by change ((2%:R : R) * (e 0 : 'cV[R]_1) 0 0 = 2%:R); rewrite mxE eqxx mulr1.
Unshelve. all: by end_near.
Qed.
