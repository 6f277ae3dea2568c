(* T10: scale-invariant blocks.  If L(s·x) = L(x) for every s > 0 (a weight block followed
   by batch-statistics normalization), then at every point w
     wᵀg = 0  (the radial derivative vanishes; no differentiability needed for d1 L w w = 0)
     H w = -g (H the Hessian of coordinate second derivatives, H_ij = ∂_i ∂_j L)
   hence wᵀHw = 0 and D = 0 identically: invariant and uninformative.
   The derivatives are those of T01_analytic (mathcomp-analysis' derive). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From CoupledCurvature Require Import Defs T01_analytic.

Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.

Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.
Local Open Scope classical_set_scope.

Section T10.
Variable R : realType.
Variable n : nat.
Local Notation V := (matrix_normedModType R n 0).

Definition scale_invariant (L : V -> R^o) :=
  forall (s : R) (x : V), 0 < s -> L (s *: x) = L x.

Lemma near0_gt : \forall h \near (0 : R^o)^', 0 < h + 1.
Proof.
move: (@dnbhs0_lt _ [pseudoMetricNormedZmodType R of R^o] 1 ltr01); apply: filterS => h.
rewrite ltr_norml => /andP [h1 _].
by rewrite -ltr_subl_addr sub0r.
Qed.

(* wᵀg = 0 in directional form: the derivative of L at w along w is 0 *)
Theorem scale_invariant_radial (L : V -> R^o) (w : V) :
  scale_invariant L -> d1 L w w = 0.
Proof.
move=> SI; rewrite /d1 /derive /=; apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])).
move: near0_gt; apply: filterS => h h1.
have -> : h *: w + w = (h + 1) *: w by rewrite scalerDl scale1r.
by rewrite SI // subrr scaler0.
Qed.

Corollary scale_invariant_wg (L : V -> R^o) (w : V) :
  scale_invariant L -> differentiable L w -> dot w (grad L w) = 0.
Proof.
by move=> SI dL; rewrite /dot -derive_grad // scale_invariant_radial.
Qed.

Lemma near_neq0 : \forall h \near (0 : R^o)^', h != 0.
Proof. exact: withinT. Qed.

Lemma derive_coord (j i : 'I_n.+1) (w : V) :
  derive (fun y : V => (y j 0 : R^o)) w (e R i) = (j == i)%:R.
Proof.
rewrite /derive /=; apply: (lim_near_cst (@norm_hausdorff _ [pseudoMetricNormedZmodType R of R^o])); move: near_neq0; apply: filterS => h h0.
by rewrite !mxE eqxx andbT addrK [_ *: _]mulrA mulVf // mul1r.
Qed.

(* H w = -g, with H = hess L w (H_ij = ∂_i ∂_j L), g = grad L w *)
Theorem scale_invariant_Hw (L : V -> R^o) (w : V) :
  scale_invariant L ->
  (forall y, differentiable L y) ->
  (forall j, differentiable (fun y : V => (d1 L (e R j) y : R^o)) w) ->
  hess L w *m w = - grad L w.
Proof.
move=> SI dL dD; apply/matrixP => i b; rewrite ord1.
pose C j : V -> R^o := fun y => y j 0.
pose G j : V -> R^o := fun y => d1 L (e R j) y.
pose P j : V -> R^o := C j * G j.
have E : (fun y : V => (d1 L y y : R^o)) = \sum_j P j.
  apply/funext => y; rewrite derive_grad // fct_sumE mxE.
  by apply: eq_bigr => j _; rewrite !mxE.
have Z : derive (fun y : V => (d1 L y y : R^o)) w (e R i) = 0.
  have -> : (fun y : V => (d1 L y y : R^o)) = cst 0.
    by apply/funext => y; rewrite scale_invariant_radial.
  exact: derive_val.
have dC j : derivable (C j) w (e R i) by apply/diff_derivable/differentiable_coord.
have dG j : derivable (G j) w (e R i) by apply/diff_derivable/dD.
move: Z; rewrite E derive_sum => [|j]; last exact: derivableM.
have -> : \sum_j derive (P j) w (e R i)
        = \sum_j (w j 0 * hess L w i j + G j w * (j == i)%:R).
  apply: eq_bigr => j _; rewrite deriveM // derive_coord.
  by rewrite /hess mxE /d2.
have S2 : \sum_j G j w * (j == i)%:R = G i w.
  rewrite (bigD1 i) //= eqxx mulr1 big1 ?addr0 // => j /negbTE ->.
  by rewrite mulr0.
rewrite big_split /= S2 => /eqP; rewrite addr_eq0 => /eqP HG.
rewrite [RHS]mxE [grad _ _ _ _]mxE -/(G i w) -HG mxE.
by apply: eq_bigr => j _; rewrite mulrC.
Qed.

(* hence wᵀHw = 0 and D = 0 *)
Corollary scale_invariant_quad (L : V -> R^o) (w : V) :
  scale_invariant L ->
  (forall y, differentiable L y) ->
  (forall j, differentiable (fun y : V => (d1 L (e R j) y : R^o)) w) ->
  quad (hess L w) w = 0 /\ coupledD w (grad L w) (hess L w) = 0.
Proof.
move=> SI dL dD; have Q : quad (hess L w) w = 0.
  rewrite /quad scale_invariant_Hw // /dot mulmxN mxE.
  by have := scale_invariant_wg SI (dL w); rewrite /dot => ->; rewrite oppr0.
by split=> //; rewrite /coupledD /RQ Q !mul0r.
Qed.

End T10.

(* non-vacuity: the constant loss is scale invariant and satisfies every hypothesis *)
Lemma T10_instance (R : realType) (n : nat) (w : matrix_normedModType R n 0) :
  let L : matrix_normedModType R n 0 -> R^o := cst 0 in
  [/\ scale_invariant L, (forall y, differentiable L y) &
      (forall j, differentiable (fun y => (d1 L (e R j) y : R^o)) w)].
Proof.
move=> L; split.
- by move=> s x _.
- by move=> y; exact: differentiable_cst.
- move=> j; have -> : (fun y => (d1 L (e R j) y : R^o)) = cst 0.
    by apply/funext => y; rewrite /d1 derive_val.
  exact: differentiable_cst.
Qed.
